"""Offline caption judge: keywords and a normal/abnormal label from a curated lexicon.

The paper's judge is an LLM; this one is a transparent, deterministic stand-in that needs
no network and no model. It reads a reviewed lexicon (``novabench/resources/lexicon.yaml``;
its header explains the rules: canonical strings, longest match, dropped words, negation
scope, normality, anatomy hierarchy, open names) and follows the benchmark judge's
protocol: keywords of both captions of a pair, standardized jointly
(:meth:`KeywordJudge.judge_pair`; ``extract`` judges one caption alone).

Negation and uncertainty use the NegEx/ConText algorithm (trigger phrases with a direction,
pseudo-triggers, scope terminators) written here over the lexicon's own matches. medspaCy's
ConText and negspaCy were measured against it on the tuning half of the judge validation
set (the judge report, ``novabench judge-report``) and did no better; they would add
spaCy to every scoring job, so the hand-written scope is kept.

Unread share: every verdict carries the share of the caption's content words the judge
could not read (``KeywordSet.unread_share``; ``explain`` lists the words), so that a score
can say how much of the compared text its keywords stand for. The words are the judge's own
tokens (accents folded and possessives dropped with :mod:`novabench.text`, split at spaces,
hyphens, slashes and brackets, lower case, American spelling). A content word has two
characters or more with a letter among them ("t2" is one, a panel letter "a" is not) and is
no number, panel label or measurement ("1.5", "2a", "5mm"), no unit, no stop word (the
lexicon's ``not_content`` lists) and no degree word (its ``skip`` list); punctuation is no
word. A content word is read when a lexicon form matched over it (a concept, a negation or
normality trigger, a measure, a form it reads and drops on purpose) or an open-name rule
took it into a keyword. The share is unread content words over content words, 0.0 for a
caption without content words (an empty one); ``KeywordSet.unread_words`` counts them, from
which a pair's keyword doubt (:func:`novabench.caption_keywords.keyword_doubt`: how far
those words could move its Clinical F1) says whether its keyword F1 can be trusted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from novabench import paths
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import ConfigError
from novabench.judges.anatomy import AnatomyTree
from novabench.judges.base import NEGATED_PREFIX, JudgeKind, KeywordSet, register_judge_kind
from novabench.text import (
    PhraseIndex,
    american_word,
    drop_possessives,
    fold_accents,
    longest_of,
    regular_plurals,
)
from novabench.yaml_data import load_yaml

DEFAULT_LEXICON = paths.RESOURCES / "lexicon.yaml"

# Words: letters/digits, keeping "t2*", "t1+c" and a leading "+" ("+C") together; decimals
# stay one token so their dot does not end a negation scope. Sentence punctuation is kept
# as a boundary token; everything else (hyphens, slashes, brackets, quotes) separates words.
_TOKEN = re.compile(r"\d+(?:\.\d+)+|\+?[a-z0-9]+(?:[*+][a-z0-9]*)*|[.;:!?,]", re.IGNORECASE)
_BOUNDARIES = frozenset(".;:!?,")
# A number with letters after it: a panel label ("2a") or a measurement ("5mm", "3t").
_NUMBER_LED = re.compile(r"\d[\d.]*[a-z]*")
_SENTENCE_ENDS = frozenset(".;:!?")
ABNORMAL_WHEN = {True: "stated", False: "never", "negated": "negated", "any": "any"}
# The lexicon's top-level keys; any other is a typo.
LEXICON_KEYS = frozenset(
    {
        "name",
        "version",
        "negation",
        "normality",
        "skip",
        "measures",
        "ignore",
        "groups",
        "thickens",
        "variant_structures",
        "technique_normal",
        "anatomy_parents",
        "open_names",
        "compounds",
        "negated_forms",
        "exact_forms",
        "engine",
        "rules",
        "not_content",
    }
)
# The engine's slots the lexicon's `engine:` section fills with its own words.
ENGINE_GROUPS = ("anatomy", "generic", "normal_state", "open_name", "open_sign")
ENGINE_CONCEPTS = (
    "agenesis",
    "hypoplasia",
    "normal_variant",
    "enlargement",
    "thickening",
    "perfusion",
)
ENGINE_KEYS = frozenset({"list_closers", "sign_heads", "groups", "concepts"})
# Every rule of the engine, by a stable id: what ``explain`` reports. The lexicon's
# ``rules:`` section gives each one or two example captions.
RULE_IDS = {
    "phrase.concept": "a form of a group's concept",
    "phrase.compound": "one phrase naming several concepts",
    "phrase.negated-form": "a phrase naming a negated concept by itself",
    "phrase.exact": "a case-sensitive abbreviation",
    "phrase.measure": "a direction and a measured quantity",
    "phrase.ignored": "a form read and dropped",
    "negation.before": "a trigger negating what follows",
    "negation.after": "a trigger negating what came since the last boundary",
    "negation.pseudo": "looks like a trigger, negates nothing",
    "negation.absence": "absent: negation of a finding",
    "negation.unassessable": "drops what came since the last boundary",
    "negation.scope-ender": "ends a negation scope",
    "negation.location": "a location word ends the scope after a negated concept",
    "negation.conditional": "negates after one of its words only",
    "negation.list-continues": "a comma inside a negated list closed by a list closer",
    "normal.scoped": "normal, and what follows in its clause is not abnormal",
    "normal.form": "gives the normality keyword",
    "normal.sentence": "normal, and its whole sentence is not abnormal",
    "open-name.head": "unknown words before a head word form a name",
    "open-name.suffix": "an unknown word with a disease suffix is a diagnosis",
    "open-name.proper": "capitalized words before a lexicon disease head join it",
    "anatomy.absent-structure": "an absent structure is agenesis",
    "caption.normal-variant": "a sentence naming a normal variant is not abnormal",
    "caption.variant-structure": "a hypoplastic or absent variant structure is normal",
    "caption.thickening": "enlargement of a thickening structure is thickening",
    "caption.perfusion-signal": "signal on a perfusion map alone is perfusion",
    "caption.technique-normal": "normal on a map or spectrum alone is its own normal",
    "caption.negated-generic": "a negated generic finding says the caption is normal",
    "verdict.abnormal": "the first mention that makes the caption abnormal",
    "verdict.normal": "no mention makes the caption abnormal",
}


@dataclass(frozen=True)
class Fired:
    """One rule that fired while reading a caption: its id, the words it read (empty for
    caption-wide rules), and the concept and group it recorded, if any."""

    rule: str
    phrase: str = ""
    concept: str = ""
    group: str = ""


@dataclass(frozen=True)
class Explanation:
    """Every rule that fired on one caption, in order, and the one that decided its flag."""

    keywords: KeywordSet
    fired: tuple[Fired, ...]
    decided: Fired
    #: The caption's content words the judge could not read, in reading order.
    unread: tuple[str, ...] = ()


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(drop_possessives(fold_accents(text), any_case=True))


def _list_goes_on(lowered: list[str], comma: int, closers: frozenset[str]) -> bool:
    """Whether the rest of the sentence after a comma closes a list ("or", "nor")."""
    for token in lowered[comma + 1 :]:
        if token in _SENTENCE_ENDS:
            return False
        if token in closers:
            return True
    return False


@dataclass(frozen=True)
class _Entry:
    """What a matched phrase means."""

    keys: tuple[str, ...] = ()  # concepts named by the phrase
    negated: bool = False  # the phrase itself is a negated concept ("non-enhancing")
    negates_after: bool = False  # opens a negation scope over what follows
    negates_before: bool = False  # negates what came since the last boundary
    ends_scope: bool = False
    location: bool = False  # ends the scope once a negated concept has been seen
    pseudo: bool = False  # looks like a trigger, negates nothing ("cannot be excluded")
    absence: bool = False  # "absent": agenesis of a structure, negation of a finding
    unassessable: bool = False  # drops what came since the last boundary
    conditional: frozenset[str] = frozenset()  # negates after one of these words only
    normal: bool = False  # gives the normality keyword
    normal_scope: bool = False  # ... and what follows in its clause is not abnormal
    normal_sentence: bool = False  # ... and its whole sentence is not abnormal
    ignored: bool = False  # read and dropped
    rule: str = field(default="phrase.concept", compare=False)  # the rule it is read by


@dataclass
class _Mention:
    key: str
    group: str
    negated: bool = False
    normal: bool = False  # in the scope of "normal"/"physiological"
    sentence: int = 0
    normal_sentence: bool = False  # makes its sentence not abnormal ("physiological")
    position: int = 0  # index of its first word
    rule: str = ""  # the rule that recorded it


class KeywordJudge:
    """Extracts normalized keywords and a normal/abnormal label with a lexicon."""

    name = "keyword-lexicon"

    def __init__(self, lexicon_path: Path | None = None):
        self.lexicon_path = Path(lexicon_path) if lexicon_path else DEFAULT_LEXICON
        try:
            raw = self.lexicon_path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the judge lexicon {self.lexicon_path} ({exc})",
                "point lexicon_path at a lexicon YAML file",
            ) from exc
        self._sha256 = hashlib.sha256(raw).hexdigest()
        # Strict (a key given twice would drop a rule silently), on libyaml's loader.
        lexicon = load_yaml(raw, f"the judge lexicon {self.lexicon_path}")
        self._check_keys(lexicon)
        self.version = str(lexicon["version"])
        self._groups: dict[str, dict] = {}
        self._concept_group: dict[str, str] = {}
        self._phrases: dict[tuple[str, ...], _Entry] = {}
        self._exact: dict[tuple[str, ...], _Entry] = {}
        self._load_groups(lexicon)
        self._load_engine(lexicon)
        self._check_rule_names(lexicon)
        self._load_phrases(lexicon)
        self._load_negation(lexicon["negation"])
        self._load_normality(lexicon.get("normality"))
        self._load_open_names(lexicon.get("open_names") or {})
        self._load_not_content(lexicon.get("not_content") or {})
        self._anatomy = self._load_anatomy(lexicon.get("anatomy_parents") or {})
        self._thickens = frozenset(self._known(list(lexicon.get("thickens") or [])))
        self._variant_structures = frozenset(
            self._known(list(lexicon.get("variant_structures") or []))
        )
        self._technique_normal = dict(lexicon.get("technique_normal") or {})
        self._known([*self._technique_normal, *self._technique_normal.values()])
        # Plurals last, so that an explicit form always wins over a generated one.
        for tokens, entry in list(self._phrases.items()):
            if entry.keys and not entry.negated:
                for plural in regular_plurals(tokens):
                    self._add(self._phrases, plural, entry, explicit=False)
        # Built once; at a position the longest form wins, a case-sensitive one a tie.
        self._phrase_index = PhraseIndex(self._phrases)
        self._exact_index = PhraseIndex(self._exact)

    # -- lexicon loading -------------------------------------------------------------
    def _fail(self, problem: str) -> ConfigError:
        return ConfigError(f"judge lexicon {self.lexicon_path.name}: {problem}", "fix the lexicon")

    def _form(self, form: object) -> tuple[str, ...]:
        # YAML 1.1 reads bare no/yes/on/off as booleans: insist on strings.
        if not isinstance(form, str) or not _tokens(form):
            raise self._fail(f"form {form!r} is not a non-empty string (quote it)")
        return tuple(_tokens(form))

    def _lower(self, form: object) -> tuple[str, ...]:
        return tuple(american_word(t.lower()) for t in self._form(form))

    def _add(self, table: dict, tokens: tuple[str, ...], entry: _Entry, explicit: bool = True):
        known = table.get(tokens)
        if known is None:
            table[tokens] = entry
        elif known != entry and explicit:
            raise self._fail(f"form {' '.join(tokens)!r} has two meanings")

    def _check_keys(self, lexicon: object) -> None:
        """The lexicon's keys, its ``engine:`` section's and its rules' ids are known ones."""
        if not isinstance(lexicon, dict):
            raise self._fail("the file is not a mapping of sections")
        sections = [("", lexicon, LEXICON_KEYS)]
        engine = lexicon.get("engine")
        if not isinstance(engine, dict):
            raise ConfigError(
                f"judge lexicon {self.lexicon_path.name}: no engine: section",
                "add engine: {list_closers, sign_heads, groups, concepts} as the built-in one has",
            )
        sections += [("engine.", engine, ENGINE_KEYS)]
        sections += [("engine.groups.", engine.get("groups") or {}, frozenset(ENGINE_GROUPS))]
        concepts = frozenset({*ENGINE_CONCEPTS, "sequences", "perfusion_signal"})
        sections += [("engine.concepts.", engine.get("concepts") or {}, concepts)]
        sections += [("rules.", lexicon.get("rules") or {}, frozenset(RULE_IDS))]
        for where, section, allowed in sections:
            for key in section:
                if key not in allowed:
                    raise ConfigError(
                        f"judge lexicon {self.lexicon_path.name}: unknown key {where}{key}",
                        f"use one of {', '.join(sorted(allowed))} under {where or 'the top'}",
                    )
        for rule, spec in (lexicon.get("rules") or {}).items():
            examples = (spec or {}).get("examples") if isinstance(spec, dict) else None
            if set(spec or {}) - {"examples"} or not examples or len(examples) > 2:
                raise ConfigError(
                    f"judge lexicon {self.lexicon_path.name}: rules.{rule} needs examples",
                    f"give rules.{rule} {{examples: [one or two captions]}}",
                )

    def _load_engine(self, lexicon: dict) -> None:
        """The words the engine's rules compare: group and concept names, list closers."""
        engine = lexicon["engine"]
        groups, concepts = engine.get("groups") or {}, engine.get("concepts") or {}
        missing = [g for g in ENGINE_GROUPS if g not in groups]
        missing += [
            c for c in (*ENGINE_CONCEPTS, "sequences", "perfusion_signal") if c not in concepts
        ]
        if missing:
            raise ConfigError(
                f"judge lexicon {self.lexicon_path.name}: engine lacks {missing[0]}",
                f"name the lexicon's own group or concept for {missing[0]} under engine:",
            )
        self._role = dict(groups)
        self._rule_concept = {c: concepts[c] for c in ENGINE_CONCEPTS}
        self._sequences = tuple(concepts["sequences"])
        self._perfusion_signal = dict(concepts["perfusion_signal"])
        self._list_closers = frozenset(engine.get("list_closers") or [])
        self._sign_heads = frozenset(engine.get("sign_heads") or [])

    def _check_rule_names(self, lexicon: dict) -> None:
        """Every concept and group the engine's rules name is defined by the lexicon."""
        rule_concepts = [
            *self._rule_concept.values(),
            *self._sequences,
            *self._perfusion_signal,
            *self._perfusion_signal.values(),
        ]
        needed = [("concept", k, k in self._concept_group) for k in rule_concepts]
        if (lexicon.get("open_names") or {}).get("heads") or []:
            open_groups = (self._role["open_name"], self._role["open_sign"])
            needed += [("group", g, g in self._groups) for g in open_groups]
        for what, name, defined in needed:
            if not defined:
                where = "the concepts of a group" if what == "concept" else "groups"
                raise ConfigError(
                    f"judge lexicon {self.lexicon_path}: the judge's rules name the {what} "
                    f"{name!r}, which the lexicon does not define",
                    f"add {name!r} to {where} of the lexicon",
                )

    def _known(self, keys: list[str]) -> tuple[str, ...]:
        for key in keys:
            if key not in self._concept_group:
                raise self._fail(f"unknown concept {key!r}")
        return tuple(keys)

    def _load_groups(self, lexicon: dict) -> None:
        for group_name, group in lexicon["groups"].items():
            if group["abnormal"] not in ABNORMAL_WHEN:
                problem = f"group {group_name}: abnormal must be true, false, negated or any"
                raise self._fail(problem)
            self._groups[group_name] = {
                "abnormal": ABNORMAL_WHEN[group["abnormal"]],
                "negatable": bool(group["negatable"]),
                "emit": bool(group.get("emit", True)),
            }
            for key, forms in group["concepts"].items():
                if key in self._concept_group:
                    raise self._fail(f"concept {key!r} is defined twice")
                self._concept_group[key] = group_name
                for form in forms:
                    self._add(self._phrases, self._lower(form), _Entry((key,)))

    def _load_phrases(self, lexicon: dict) -> None:
        for form, keys in (lexicon.get("compounds") or {}).items():
            entry = _Entry(self._known(list(keys)), rule="phrase.compound")
            self._add(self._phrases, self._lower(form), entry)
        for form, key in (lexicon.get("negated_forms") or {}).items():
            entry = _Entry(self._known([key]), negated=True, rule="phrase.negated-form")
            self._add(self._phrases, self._lower(form), entry)
        for form, key in (lexicon.get("exact_forms") or {}).items():
            entry = _Entry(self._known([key]), rule="phrase.exact")
            self._add(self._exact, self._form(form), entry)
        for form in lexicon.get("ignore") or []:
            self._add(self._phrases, self._lower(form), _Entry(ignored=True, rule="phrase.ignored"))
        # Degree words are taken out before matching, so "choline is markedly elevated"
        # reads as the form "choline is elevated".
        self._skip = frozenset(w for f in lexicon.get("skip") or [] for w in self._lower(f))
        self._load_measures(lexicon.get("measures") or {})

    def _load_measures(self, measures: dict) -> None:
        """Forms of "<direction> <quantity>" in either order ("elevated choline", "NAA is
        reduced", "reduction of NAA"), generated from directions and quantities."""
        directions = measures.get("directions") or {}
        for quantity in (measures.get("quantities") or {}).values():
            for direction, key in quantity.items():
                if direction == "forms":
                    continue
                entry = _Entry(self._known([key]), rule="phrase.measure")
                for word in directions[direction]:
                    for form in quantity["forms"]:
                        for pattern in measures["patterns"]:
                            phrase = pattern.format(d=word, q=form)
                            self._add(self._phrases, self._lower(phrase), entry, explicit=False)

    def _load_negation(self, negation: dict) -> None:
        before = {self._lower(f) for f in negation["before"]}
        self._negation_openers = frozenset(before)
        after = {self._lower(f) for f in negation["after"]}
        for tokens in before | after:
            rule = "negation.before" if tokens in before else "negation.after"
            entry = _Entry(
                negates_after=tokens in before, negates_before=tokens in after, rule=rule
            )
            self._add(self._phrases, tokens, entry)
        kinds = {
            "pseudo": _Entry(pseudo=True, rule="negation.pseudo"),
            "absence": _Entry(absence=True, rule="negation.absence"),
            "unassessable": _Entry(unassessable=True, rule="negation.unassessable"),
            "scope_enders": _Entry(ends_scope=True, rule="negation.scope-ender"),
            "location_words": _Entry(location=True, rule="negation.location"),
        }
        for kind, entry in kinds.items():
            for form in negation.get(kind) or []:
                self._add(self._phrases, self._lower(form), entry)
        for form, openers in (negation.get("conditional") or {}).items():
            words = frozenset(w for opener in openers for w in self._lower(opener))
            entry = _Entry(conditional=words, location=True, rule="negation.conditional")
            self._add(self._phrases, self._lower(form), entry)

    def _load_normality(self, normality: dict | None) -> None:
        if not normality:
            self._normal_key = None
            return
        self._normal_key = normality["keyword"]
        self._known([self._normal_key])
        for form in normality.get("scoped") or []:
            entry = _Entry(normal=True, normal_scope=True, rule="normal.scoped")
            self._add(self._phrases, self._lower(form), entry)
        for form in normality.get("forms") or []:
            # "no mass lesion or collection": a negated normal form negates the rest of
            # its list too.
            tokens = self._lower(form)
            opens = any(tokens[: len(t)] == t for t in self._negation_openers)
            entry = _Entry(normal=True, negates_after=opens, rule="normal.form")
            self._add(self._phrases, tokens, entry)
        for form in normality.get("sentence") or []:
            entry = _Entry(normal=True, normal_sentence=True, rule="normal.sentence")
            self._add(self._phrases, self._lower(form), entry)

    def _load_open_names(self, spec: dict) -> None:
        self._heads = frozenset(w for f in spec.get("heads", []) for w in self._lower(f))
        self._suffixes = tuple(spec.get("suffixes", []))
        self._min_suffix_word = int(spec.get("min_suffix_word", 7))
        self._max_open_words = int(spec.get("max_words", 3))
        self._stopwords = frozenset(w for f in spec.get("stopwords", []) for w in self._lower(f))

    def _load_not_content(self, spec: dict) -> None:
        """Words that are no content words: the lexicon's ``not_content`` stop words and
        units and its degree words (``skip``). Not the open-name stop words: those stop a
        name and include content words ("lesion", "chronic")."""
        words = [*(spec.get("stop_words") or []), *(spec.get("units") or [])]
        self._not_content = frozenset({*(w for f in words for w in self._lower(f)), *self._skip})

    def _load_anatomy(self, parents: dict) -> AnatomyTree:
        for child, ups in parents.items():
            for key in (child, *ups):
                if self._concept_group.get(key) != self._role["anatomy"]:
                    raise self._fail(f"anatomy_parents names {key!r}, not an anatomy concept")
        return AnatomyTree(parents)

    # -- judging -----------------------------------------------------------------------
    def identity(self) -> dict:
        """Name, the judge's code fingerprint (its matching code and built-in lexicon), the
        lexicon's version and SHA-256 (recorded with scores)."""
        return {
            "name": self.name,
            "code": code_fingerprint(__name__),
            "lexicon_version": self.version,
            "lexicon": self.lexicon_path.name,
            "lexicon_sha256": self._sha256,
        }

    def _match(self, original: list[str], lowered: list[str], i: int) -> tuple[int, _Entry]:
        """Longest phrase at position ``i`` (case-sensitive forms first); (0, None) if none."""
        return longest_of((self._exact_index, original), (self._phrase_index, lowered), start=i)

    def _read(self, text: str) -> tuple[list[_Mention], list[Fired], _Unread]:
        """Every concept a caption names, with its negation and normality (in order), and
        the content words it could not read."""
        original = [t for t in _tokens(text or "") if t.lower() not in self._skip]
        lowered = [american_word(t.lower()) for t in original]
        scan = _Scan(self._list_closers)
        i = 0
        while i < len(lowered):
            if lowered[i] in _BOUNDARIES:
                scan.boundary(lowered, i)
                i += 1
                continue
            length, entry = self._match(original, lowered, i)
            scan.words.update(lowered[i : i + max(length, 1)])
            if entry is None:
                scan.position = i
                self._unknown(scan, original[i], lowered[i])
                i += 1
                continue
            scan.position = i
            self._apply(scan, entry, lowered[i : i + length])
            scan.read.update(range(i, i + length))
            scan.run = []
            i += length
        mentions, fired = self._post(scan.mentions, scan.fired)
        return mentions, fired, self._unread(lowered, scan.read)

    def is_content_word(self, word: str) -> bool:
        """Whether a lower-cased word of the judge's tokenization is a content word: two
        characters or more, a letter among them ("t2" is one, "a" is not), no number, panel
        label or measurement ("2a", "5mm", "1.5"), no unit, no stop word and no degree word
        (``skip``)."""
        return (
            len(word) >= 2
            and re.search(r"[a-z]", word) is not None
            and not _NUMBER_LED.fullmatch(word)
            and word not in self._not_content
        )

    def _unread(self, lowered: list[str], read: set[int]) -> _Unread:
        """The content words outside every form the judge matched and every open name it
        formed, in reading order, and how many content words there are."""
        content = [
            i for i, w in enumerate(lowered) if w not in _BOUNDARIES and self.is_content_word(w)
        ]
        return _Unread(tuple(lowered[i] for i in content if i not in read), len(content))

    def _apply(self, scan: _Scan, entry: _Entry, words: list[str]) -> None:
        """Update the scan with one matched phrase."""
        phrase = " ".join(words)
        fired = scan.fired
        if entry.ignored or entry.pseudo:
            fired.append(Fired(entry.rule, phrase))
            return
        if entry.ends_scope:
            if scan.in_scope or scan.normal_scope:  # a scope it ends
                fired.append(Fired(entry.rule, phrase))
            scan.end_scope()
            return
        if entry.conditional and entry.conditional & scan.words:
            fired.append(Fired(entry.rule, phrase))
            scan.open_negation()
            return
        if entry.location:
            if scan.negated_in_scope:
                fired.append(Fired("negation.location", phrase))
                scan.in_scope = scan.negated_in_scope = scan.absence = False
            return
        if entry.unassessable:
            fired.append(Fired(entry.rule, phrase))
            scan.drop_clause()
            return
        if not entry.keys:
            fired.append(Fired(entry.rule, phrase))
        if entry.negates_before:
            for mention in scan.clause:
                mention.negated = True
        if entry.negates_after or entry.absence:
            scan.open_negation()
            scan.absence = entry.absence
        if entry.normal:
            group = self._role["normal_state"]
            normal = _Mention(self._normal_key, group, sentence=scan.sentence, rule=entry.rule)
            normal.normal_sentence = entry.normal_sentence
            scan.add(normal, False)
            scan.normal_scope = scan.normal_scope or entry.normal_scope
        head = self._absorbed(scan, entry, words)
        for key in entry.keys:
            rule = "open-name.proper" if head else entry.rule
            self._mention(scan, head + key, self._concept_group[key], entry.negated, rule, phrase)

    def _mention(
        self,
        scan: _Scan,
        key: str,
        group: str,
        negated: bool = False,
        rule: str = "phrase.concept",
        phrase: str = "",
    ) -> None:
        """Record one concept under the scan's negation, absence and normality."""
        if scan.absence and group == self._role["anatomy"]:
            # "absent septum pellucidum": congenital absence is a finding, not a negation.
            agenesis = self._rule_concept["agenesis"]
            group = self._concept_group[agenesis]
            rule = "anatomy.absent-structure"
            scan.add(_Mention(agenesis, group, sentence=scan.sentence, rule=rule), True)
            scan.fired.append(Fired(rule, phrase, agenesis, group))
            scan.in_scope = scan.absence = False
        negatable = self._groups[group]["negatable"]
        mention = _Mention(
            key,
            group,
            negated=negated or (scan.in_scope and negatable),
            normal=scan.normal_scope,
            sentence=scan.sentence,
            position=scan.position,
            rule=rule,
        )
        scan.fired.append(Fired(rule, phrase or key, key, group))
        scan.add(mention, negatable)
        if negatable:
            scan.absence = False
            scan.negated_in_scope = scan.negated_in_scope or mention.negated

    def _absorbed(self, scan: _Scan, entry: _Entry, words: list[str]) -> str:
        """Proper names right before a disease head join it ("Rasmussen encephalitis")."""
        if len(entry.keys) != 1 or words[-1] not in self._heads:
            return ""
        if self._concept_group[entry.keys[0]] not in (
            self._role["open_name"],
            self._role["open_sign"],
        ):
            return ""
        names = []
        for original, lowered, position in reversed(scan.run):
            if not original[:1].isupper():
                break
            names.insert(0, lowered)
            scan.read.add(position)
        return " ".join(names) + " " if names else ""

    def _unknown(self, scan: _Scan, original: str, lowered: str) -> None:
        """A word outside the lexicon: part of an open name, or a word to remember."""
        if lowered in self._heads and scan.run:
            run = scan.run[-self._max_open_words :]
            sign = lowered in self._sign_heads
            group = self._role["open_sign"] if sign else self._role["open_name"]
            name = " ".join([*(w for _, w, _ in run), lowered])
            self._mention(scan, name, group, rule="open-name.head")
            scan.read.update([scan.position, *(at for _, _, at in run)])
            scan.run = []
            return
        if len(lowered) >= self._min_suffix_word and lowered.endswith(self._suffixes):
            names = [(w, at) for o, w, at in scan.run if o[:1].isupper()]
            name = " ".join([*(w for w, _ in names), lowered])
            self._mention(scan, name, self._role["open_name"], rule="open-name.suffix")
            scan.read.update([scan.position, *(at for _, at in names)])
            scan.run = []
            return
        if lowered in self._stopwords or not lowered.isalpha():
            scan.run = []
        else:
            scan.run.append((original, lowered, scan.position))

    def _post(self, mentions: list[_Mention], fired: list[Fired]) -> tuple[list, list]:
        """Caption-wide rules of the protocol, in the lexicon's terms."""
        concept = self._rule_concept
        variants = {m.sentence for m in mentions if m.key == concept["normal_variant"]}
        normal_sentences = variants | {m.sentence for m in mentions if m.normal_sentence}
        # A hypoplastic or absent A1 segment or transverse sinus is a normal variant.
        variant = {m.sentence for m in mentions if m.key in self._variant_structures}
        absent = (concept["hypoplasia"], concept["agenesis"])
        variant &= {m.sentence for m in mentions if m.key in absent}
        normal_sentences |= variant
        thick = {m.sentence for m in mentions if m.key in self._thickens}
        keys = {m.key for m in mentions}
        measured = not keys & set(self._sequences)  # a map or spectrum alone
        # "ASL shows increased signal": signal on a perfusion map is perfusion.
        remap = dict(self._perfusion_signal) if measured and concept["perfusion"] in keys else {}
        perfusion_signal = set(remap)
        if measured:
            for technique, normal in self._technique_normal.items():
                if technique in keys:
                    remap[self._normal_key] = normal
        for mention in mentions:
            if not mention.normal and mention.sentence in normal_sentences:
                why = "caption.variant-structure" if mention.sentence in variant else ""
                why = why or "caption.normal-variant"
                fired.append(Fired(why, "", mention.key, mention.group))
            mention.normal = mention.normal or mention.sentence in normal_sentences
            if mention.key == concept["enlargement"] and mention.sentence in thick:
                mention.key = concept["thickening"]  # an enlarged nerve, stalk or muscle
                fired.append(Fired("caption.thickening", "", mention.key, mention.group))
            if mention.key in remap:
                why = "caption.perfusion-signal" if mention.key in perfusion_signal else ""
                mention.key = remap[mention.key]
                why = why or "caption.technique-normal"
                fired.append(Fired(why, "", mention.key, mention.group))
        generic = self._role["generic"]
        if any(m.group == generic and m.negated for m in mentions):
            # "no (focal) lesion", "without abnormality": the caption says normal.
            rule = "caption.negated-generic"
            group = self._role["normal_state"]
            mentions.append(_Mention(self._normal_key, group, rule=rule))
            fired.append(Fired(rule, "", self._normal_key, group))
        return mentions, fired

    def _verdict(self, mentions: list[_Mention]) -> tuple[KeywordSet, Fired]:
        keywords = set()
        decided = None
        for mention in mentions:
            group = self._groups[mention.group]
            key = NEGATED_PREFIX + mention.key if mention.negated else mention.key
            if group["emit"]:
                keywords.add(key)
            when = group["abnormal"]
            if decided is None and (
                (when == "stated" and not mention.negated and not mention.normal)
                or (when == "negated" and mention.negated)
                or (when == "any" and not mention.normal)
            ):
                decided = Fired("verdict.abnormal", mention.rule, key, mention.group)
        verdict = KeywordSet(frozenset(keywords), decided is not None)
        return verdict, decided or Fired("verdict.normal")

    def extract(self, text: str) -> KeywordSet:
        """Keywords, the normal/abnormal label and the unread share of one caption,
        judged alone."""
        mentions, _, unread = self._read(text)
        verdict = self._verdict(mentions)[0]
        return replace(verdict, unread_share=unread.share, unread_words=len(unread.words))

    def explain(self, text: str) -> Explanation:
        """Every rule that fired on one caption, in reading order, then the caption-wide
        ones, and the rule that decided its flag: ``verdict.abnormal`` names the first
        abnormal mention (its ``phrase`` the rule that recorded it), or ``verdict.normal``;
        and the content words it could not read."""
        mentions, fired, unread = self._read(text)
        verdict, decided = self._verdict(mentions)
        verdict = replace(verdict, unread_share=unread.share, unread_words=len(unread.words))
        return Explanation(verdict, (*fired, decided), decided, unread.words)

    def judge_pair(self, reference: str, prediction: str) -> tuple[KeywordSet, KeywordSet]:
        """Keywords and labels of a reference and a prediction, standardized jointly: anatomy
        one side names more finely than the other becomes the other side's container."""
        ref, pred = self.extract(reference), self.extract(prediction)
        ref_keys, pred_keys = self._anatomy.standardize(ref.keywords, pred.keywords)
        return replace(ref, keywords=ref_keys), replace(pred, keywords=pred_keys)


@dataclass(frozen=True)
class _Unread:
    """The content words of a caption the judge could not read, of ``n_content``."""

    words: tuple[str, ...]
    n_content: int

    @property
    def share(self) -> float:
        """0.0 for a caption without content words: nothing was left unread."""
        return len(self.words) / self.n_content if self.n_content else 0.0


class _Scan:
    """The state of reading one caption left to right (negation scope, clause, names)."""

    def __init__(self, list_closers: frozenset[str]) -> None:
        self.list_closers = list_closers
        self.fired: list[Fired] = []
        self.mentions: list[_Mention] = []
        self.clause: list[_Mention] = []  # negatable mentions since the last boundary
        self.in_scope = self.negated_in_scope = self.absence = self.normal_scope = False
        self.sentence = self.position = 0
        self.words: set[str] = set()  # words of the sentence so far (conditional triggers)
        # Unknown words right before here: (as written, lower-cased, position).
        self.run: list[tuple[str, str, int]] = []
        self.read: set[int] = set()  # positions of words a form or an open name read

    def add(self, mention: _Mention, negatable: bool) -> None:
        self.mentions.append(mention)
        if negatable:
            self.clause.append(mention)

    def open_negation(self) -> None:
        self.in_scope, self.negated_in_scope = True, False

    def end_scope(self) -> None:
        self.in_scope = self.negated_in_scope = self.absence = self.normal_scope = False
        self.clause = []

    def drop_clause(self) -> None:
        """'... cannot be assessed': the clause's findings are no statement."""
        dropped = {id(m) for m in self.clause}
        self.mentions = [m for m in self.mentions if id(m) not in dropped]
        self.end_scope()

    def boundary(self, lowered: list[str], i: int) -> None:
        self.run = []
        self.normal_scope = False
        # "No hemorrhage, edema or mass effect": a comma inside a negated list (one closed
        # by "or"/"nor" in the same sentence) keeps the negation open.
        if (
            lowered[i] == ","
            and self.negated_in_scope
            and _list_goes_on(lowered, i, self.list_closers)
        ):
            self.fired.append(Fired("negation.list-continues", ","))
            return
        self.in_scope = self.negated_in_scope = self.absence = False
        self.clause = []
        if lowered[i] in _SENTENCE_ENDS:
            self.sentence += 1
            self.words = set()


@register_judge_kind
class KeywordLexiconKind(JudgeKind):
    """``kind: keyword-lexicon``: this module's offline caption judge."""

    name = "keyword-lexicon"
    tasks = ("captioning",)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"lexicon_path": {"type": "string", "minLength": 1}},
    }

    def build(self, name, settings, task, cache_dir=None) -> KeywordJudge:
        return KeywordJudge(**settings)

    def input_files(self, name, settings, task, resolve) -> list[str]:
        """A configured lexicon: editing it changes the verdicts, so it re-scores. The
        built-in one is part of the judge's code fingerprint (novabench.code_fingerprint)."""
        path = settings.get("lexicon_path")
        return [resolve(path)] if path else []
