"""LLM judges for Tasks 2 and 3, the paper's protocol (its judge is GPT-4o).

- :class:`LLMPairedCaptionJudge` (captioning, ``protocol: paired``, the default) sends one
  request per (reference, prediction) pair, as the paper does. The LLM lists the raw
  keywords of both captions in five categories (anatomy, imaging characteristics,
  findings, negated findings kept with their negation, sequence and plane), standardizes
  both lists *together* so that one concept is one string on both sides (synonyms to one
  term, anatomy to the broader structure), and labels each caption normal or abnormal.
  Judging each caption alone cannot make the two sides' words meet, and gives a lower F1.
- :class:`LLMKeywordJudge` (captioning, ``protocol: per-caption``) asks for the keywords of
  each caption in a separate request, as earlier versions of this project did.
- :class:`LLMDiagnosisJudge` (diagnosis) sends one request per image: the reference
  diagnosis and the ranked candidates; the LLM names the first candidate that is the same
  core disease (synonyms and differences in specificity or cause allowed), or none. That
  one rank gives Top-1 and Top-5 together.

Answers are read tolerantly (:mod:`novabench.answer_json`) and normalized here as well, so
that equal concepts are equal strings: lower case, spaces for hyphens, sequences and planes
mapped onto the benchmark's modality words (``t1``, ``t2``, ``flair``, ``dwi``,
``axial``...), negated findings as ``neg:<finding>`` like the keyword judge. The mapping is
one function of a string, so what the LLM made equal stays equal.

Requests go through the ``openai_compatible`` adapter's ``complete_many`` (concurrent,
retried, and cached under ``<cache_dir>/judges/<judge name>/`` like any prediction), so
re-scoring sends no request twice and needs no network once every answer is cached.
Identical requests within one batch are sent once. The model that answered (the
response's ``model`` and ``system_fingerprint``) is recorded with the judge's identity.

Nothing falls back silently: a missing key, an unreachable endpoint, or more failed or
unreadable answers than ``max_failure_rate`` (default 0 %) stops scoring with one line;
unreadable answers are then removed from the cache, so a re-run asks again. Within the
rate, a caption pair without a verdict is None (scores leave that image out of the judge's
metrics and count it); a diagnosis without one counts as not matched.
"""

from __future__ import annotations

import logging
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from novabench import paths
from novabench.answer_json import json_spans, load_lenient
from novabench.cache import request_key
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import ConfigError, NovaError, settings_error
from novabench.io import resolve_path
from novabench.judges.base import (
    NEGATED_PREFIX,
    JudgeKind,
    KeywordSet,
    PairVerdict,
    RankedVerdict,
    ServiceRequests,
    Verdict,
    register_judge_kind,
)
from novabench.models import openai_compatible
from novabench.provenance import sha256_text

log = logging.getLogger(__name__)

#: How a caption judge asks: one request per (reference, prediction) pair (the paper's), or
#: one per caption. A diagnosis judge always asks once per image for the ranked list.
PROTOCOLS = ("paired", "per-caption")
DEFAULT_PROTOCOL = "paired"
DIAGNOSIS_PROTOCOL = "ranked-list"
#: The tasks whose answers an llm judge reads, and the ways it can ask for each (the first
#: is the default); the judge classes below implement each pair.
TASK_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "captioning": PROTOCOLS,
    "diagnosis": (DIAGNOSIS_PROTOCOL,),
}
# The default prompts ship inside the package (the one copy: the workflow's configurations
# name them by their path in it), so an installed novabench finds them too.
PROMPTS_DIR = paths.JUDGE_PROMPTS


@dataclass(frozen=True)
class PromptSpec:
    """The default prompt of one way of asking, and the placeholders its template uses."""

    default: str
    placeholders: frozenset[str]


PROMPT_SPECS: dict[str, PromptSpec] = {
    "paired": PromptSpec("judge-caption-paired-v1.txt", frozenset({"reference", "prediction"})),
    "per-caption": PromptSpec("judge-keywords-v1.txt", frozenset({"caption"})),
    DIAGNOSIS_PROTOCOL: PromptSpec(
        "judge-diagnosis-v1.txt", frozenset({"reference", "candidates"})
    ),
}
# A judge should answer the same way every time: greedy decoding, and room for two
# captions' keyword lists (raw and standardized). The adapter's own defaults are the
# paper's settings for *models*.
BACKEND_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 2048}
# Config paths are relative to the working directory, else to the repository (where the
# workflow lives), as everywhere in the configuration. An installed package has no
# repository: its paths are relative to the working directory only.
REPOSITORY = paths.REPOSITORY

SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["backend"],
    "properties": {
        "backend": openai_compatible.SETTINGS_SCHEMA,
        "protocol": {"enum": list(PROTOCOLS)},
        "prompts": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                task: {"type": "string", "minLength": 1} for task in tuple(TASK_PROTOCOLS)
            },
        },
        "max_failure_rate": {"type": "number", "minimum": 0, "maximum": 100},
    },
}

T = TypeVar("T")


class UnreadableAnswer(ValueError):
    """The judge answered, but not in the form the prompt asks for."""


# --- settings and environment -------------------------------------------------------------


def _default_resolve(path: str) -> str:
    return resolve_path(path, REPOSITORY)


def task_protocol(task: str, protocol: str) -> str:
    """How the judge of ``task`` asks: the caption protocol, or the diagnosis one."""
    protocols = TASK_PROTOCOLS[task]
    return protocol if protocol in protocols else protocols[0]


def check_settings(
    name: str, settings: dict[str, Any], resolve: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """Validate an ``llm`` judge's settings; return them resolved (defaults, prompt paths).

    Raises ConfigError naming ``judges.<name>.settings.<key>`` and the fix.
    """
    import jsonschema

    where = f"judges.{name}.settings"
    try:
        jsonschema.validate(settings, SETTINGS_SCHEMA)
    except jsonschema.ValidationError as exc:
        raise settings_error(exc, where, "see the llm judge in config/README.md") from None
    resolve = resolve or _default_resolve
    backend = openai_compatible.resolve_settings(name, {**BACKEND_DEFAULTS, **settings["backend"]})
    protocol = settings.get("protocol", DEFAULT_PROTOCOL)
    prompts = {
        task: settings.get("prompts", {}).get(task)
        or str(PROMPTS_DIR / PROMPT_SPECS[task_protocol(task, protocol)].default)
        for task in TASK_PROTOCOLS
    }
    return {
        "backend": backend,
        "backend_settings": {**BACKEND_DEFAULTS, **settings["backend"]},
        "protocol": protocol,
        "prompts": {task: Path(resolve(path)) for task, path in prompts.items()},
        "max_failure_rate": float(settings.get("max_failure_rate", 0.0)),
    }


def read_prompt(name: str, task: str, path: Path, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The judge's prompt template for ``task``; ConfigError if absent or malformed."""
    try:
        template = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"judges.{name}: cannot read the {task} judge prompt {path} ({exc.strerror or exc})",
            f"fix judges.{name}.settings.prompts.{task}",
        ) from None
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        fields = {f"malformed: {exc}"}
    ask = task_protocol(task, protocol)
    wanted = PROMPT_SPECS[ask].placeholders
    if fields != wanted:
        expected = ", ".join("{" + f + "}" for f in sorted(wanted))
        raise ConfigError(
            f"judges.{name}: the {task} judge prompt {path} has the placeholders "
            f"{sorted(fields)}, not {expected} (protocol {ask})",
            f"use exactly {expected} and double literal braces {{{{ }}}}",
        )
    return template


def prompt_paths(
    name: str, settings: dict[str, Any], resolve: Callable[[str], str] | None = None
) -> dict[str, str]:
    """Task -> the resolved path of its judge prompt (for the workflow's inputs)."""
    resolved = check_settings(name, settings, resolve)
    return {task: str(path) for task, path in resolved["prompts"].items()}


def api_resource(settings: dict[str, Any]) -> str:
    """The Snakemake resource ``api_<provider>`` that the judge's requests count against."""
    return openai_compatible.api_resource(settings.get("backend", {}))


def _endpoint_problem(name: str, backend: dict[str, Any]) -> NovaError | None:
    return openai_compatible.endpoint_problem(
        f"judges.{name}",
        backend,
        key_fix="before scoring, or choose another judge under tasks.<task>.judge",
        url_fix=f"start the server or fix judges.{name}.settings.backend.base_url, and check "
        "the network",
        holder="the judge's API key",
    )


# --- the judges -----------------------------------------------------------------------------


class _LLMJudge:
    """Shared machinery: prompt, backend, batch requests with failure accounting."""

    task: ClassVar[str]
    protocol: ClassVar[str]  # how it asks (a key of PROMPT_SPECS)
    #: Tokens of one answer, for the cost estimate until answers were measured.
    answer_tokens: ClassVar[int]
    requests_per_image: ClassVar[int] = 1

    def __init__(
        self,
        name: str,
        settings: dict[str, Any],
        *,
        cache_dir: Path | None = None,
        resolve: Callable[[str], str] | None = None,
    ):
        self.name = name
        if len(TASK_PROTOCOLS[self.task]) > 1:  # the class decides the protocol, hence the prompt
            settings = {**settings, "protocol": self.protocol}
        resolved = check_settings(name, settings, resolve)
        self.prompt_path = resolved["prompts"][self.task]
        self.template = read_prompt(name, self.task, self.prompt_path, resolved["protocol"])
        self.max_failure_rate = resolved["max_failure_rate"]
        # A judge's cache sits apart from the models' (a judge may share a model's name).
        judges_cache = None if cache_dir is None else Path(cache_dir) / "judges"
        self.adapter = openai_compatible.Adapter(
            name, resolved["backend_settings"], cache_dir=judges_cache
        )
        self.counts: Counter[str] = Counter()
        # (served model, system fingerprint) of every answer read, cached ones included.
        self.served: Counter[tuple[str | None, str | None]] = Counter()

    def service_requests(self, name: str, select: Any = None) -> ServiceRequests:
        """What the cost estimate counts of this judge (``select``: which pairs it gets)."""
        config = self.adapter.config
        prices = (config["price_per_million_input"], config["price_per_million_output"])
        return ServiceRequests(
            name,
            self,
            select,
            self.template,
            config["system_prompt"] or "",
            prices,
            self.answer_tokens,
            self.requests_per_image,
        )

    # -- record ------------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """Everything that determines the verdicts (no key): backend, settings, protocol,
        prompt, and the model that answered as the server named it (once it has)."""
        backend = self.adapter.identity()["settings"]
        return {
            "name": f"llm/{backend['model']}",
            # This module's requests and reading of answers, and its prompts.
            "code": code_fingerprint(__name__),
            "kind": "llm",
            "judge": self.name,
            "task": self.task,
            "protocol": self.protocol,
            "backend": {"adapter": "openai_compatible", **backend},
            "served": self.served_identity(),
            "prompt": self.prompt_path.name,
            "prompt_id": self.prompt_path.stem,
            "prompt_sha256": sha256_text(self.template),
            "max_failure_rate": self.max_failure_rate,
        }

    def served_identity(self) -> dict[str, Any]:
        """The served model names and system fingerprints of the answers so far, sorted;
        ``unknown`` counts answers without a model name (cache entries of older versions)."""
        models = {m for m, _ in self.served if m}
        fingerprints = {f for _, f in self.served if f}
        unknown = sum(n for (m, _), n in self.served.items() if not m)
        return {
            "model": sorted(models),
            "system_fingerprint": sorted(fingerprints),
            "answers": sum(self.served.values()),
            "unknown": unknown,
        }

    def usage(self) -> dict[str, Any]:
        """Requests so far: asked (distinct), cached, sent, failed, unreadable, tokens, cost;
        ``label_conflicts``: paired answers whose stated agreement contradicts their labels."""
        counts = {
            key: int(self.counts[key])
            for key in (
                "requests",
                "cached",
                "sent",
                "failed",
                "unreadable",
                "label_conflicts",
                "prompt_tokens",
                "completion_tokens",
            )
        }
        counts["cost_usd"] = self.adapter.cost(
            {k: counts[k] for k in ("prompt_tokens", "completion_tokens")}
        )
        return counts

    # -- requests ----------------------------------------------------------------------------

    def _cache_key(self, prompt: str) -> str:
        request = openai_compatible.ChatRequest(
            "judge", prompt, self.adapter.config["system_prompt"], None
        )
        return request_key(self.adapter.request_identity(request))

    def cached(self, prompt: str) -> bool:
        """Whether this prompt's answer is in the cache (the estimate counts the rest)."""
        cache = self.adapter.cache
        return cache is not None and self._cache_key(prompt) in cache

    def _check_can_send(self, prompts: Sequence[str]) -> None:
        """Only requests without a cached answer need the key and the endpoint."""
        cache = self.adapter.cache
        if cache is not None and all(self._cache_key(p) in cache for p in prompts):
            return
        backend = self.adapter.config
        problem = _endpoint_problem(self.name, backend)
        if problem is not None:
            raise problem

    def _forget(self, prompt: str) -> None:
        """Drop a cached answer (an unreadable one), so that the next run asks again."""
        if self.adapter.cache is not None:
            self.adapter.cache.path(self._cache_key(prompt)).unlink(missing_ok=True)

    def _ask(self, prompts: Sequence[str], read: Callable[[str, str], T]) -> list[T | None]:
        """Every prompt's verdict, ``read(prompt, answer)`` (None where the judge could not
        give one, within the allowed failure rate); identical prompts are sent once."""
        unique = list(dict.fromkeys(prompts))
        if not unique:
            return []
        self._check_can_send(unique)
        responses = self.adapter.complete_many(unique, progress=f"judge {self.name} ({self.task})")
        verdicts: dict[str, T | None] = {}
        failed: list[str] = []
        unreadable: list[tuple[str, str]] = []  # (prompt, why)
        for prompt, response in zip(unique, responses, strict=True):
            self.counts["requests"] += 1
            self.counts["cached" if response.cached else "sent"] += 1
            if not response.cached:
                for key in ("prompt_tokens", "completion_tokens"):
                    self.counts[key] += (response.usage or {}).get(key, 0)
            verdicts[prompt] = None
            if response.error is not None or response.raw is None:
                failed.append(response.error or "no answer")
                continue
            self.served[(response.served_model, response.system_fingerprint)] += 1
            try:
                verdicts[prompt] = read(prompt, response.raw)
            except UnreadableAnswer as exc:
                snippet = " ".join(response.raw.split())[:120]
                unreadable.append((prompt, f"{exc}: {snippet!r}"))
        self.counts["failed"] += len(failed)
        self.counts["unreadable"] += len(unreadable)
        bad = len(failed) + len(unreadable)
        log.info(
            "judge %s (%s): %d distinct requests, %d from the cache, %d failed, %d unreadable",
            self.name,
            self.task,
            len(unique),
            sum(r.cached for r in responses),
            len(failed),
            len(unreadable),
        )
        if bad and 100.0 * bad / len(unique) > self.max_failure_rate:
            for prompt, _ in unreadable:
                self._forget(prompt)
            raise NovaError(self._failure_message(len(unique), failed, unreadable), self._fix())
        for reason in failed:
            log.warning("judge %s: a request failed (%s); scored as no verdict", self.name, reason)
        for _, reason in unreadable:
            log.warning("judge %s: unreadable answer (%s); scored as no verdict", self.name, reason)
        return [verdicts[p] for p in prompts]

    def _failure_message(
        self, total: int, failed: list[str], unreadable: list[tuple[str, str]]
    ) -> str:
        parts = []
        if failed:
            parts.append(f"{len(failed)} of {total} requests failed (first: {failed[0]})")
        if unreadable:
            parts.append(
                f"{len(unreadable)} of {total} answers could not be read "
                f"(first: {unreadable[0][1]})"
            )
        return (
            f"judges.{self.name} ({self.task}): {' and '.join(parts)}, more than "
            f"max_failure_rate {self.max_failure_rate:g}% allows; no scores were written"
        )

    def _fix(self) -> str:
        return (
            "re-run scoring: answers that arrived are cached and only the rest is asked "
            "again; if the endpoint fails, check it and the key; if answers stay unreadable, "
            f"revise the judge prompt or raise judges.{self.name}.settings.max_failure_rate"
        )


class LLMKeywordJudge(_LLMJudge):
    """Captioning judge, one request per caption (``protocol: per-caption``): keywords by
    category and a normal/abnormal label from an LLM.

    Implements the caption-judge interface (``extract``, ``extract_many``, ``identity``) and
    ``judge_pairs``, which scores use: a pair whose caption the judge could not read
    (within ``max_failure_rate``) has no verdict (None). ``extract``/``extract_many`` give
    such a caption an empty, normal KeywordSet (counted in ``usage``).
    """

    task = "captioning"
    protocol = "per-caption"
    # Each caption's raw and standardized keywords in five categories and a label.
    answer_tokens = 175
    requests_per_image = 2  # the reference and the prediction

    def extract(self, text: str) -> KeywordSet:
        return self.extract_many([text])[0]

    def extract_many(self, texts: Sequence[str]) -> list[KeywordSet]:
        """Keywords of every text, the requests sent concurrently; empty texts need none."""
        verdicts = self._verdicts(texts)
        return [verdicts[t] or _EMPTY for t in texts]

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict:
        return self.judge_pairs([(reference, prediction)])[0]

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        """Each caption of each pair judged alone; None where either has no verdict."""
        verdicts = self._verdicts([text for pair in pairs for text in pair])
        out: list[PairVerdict] = []
        for reference, prediction in pairs:
            ref, pred = verdicts[reference], verdicts[prediction]
            out.append(None if ref is None or pred is None else (ref, pred))
        return out

    def request_prompts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (one per non-empty caption)."""
        asked = [t for t in dict.fromkeys(t for pair in pairs for t in pair) if t and t.strip()]
        return list(dict.fromkeys(self.template.format(caption=t.strip()) for t in asked))

    def _verdicts(self, texts: Sequence[str]) -> dict[str, KeywordSet | None]:
        """Text -> its KeywordSet (None: no verdict); an empty text has no keywords."""
        asked = [t for t in dict.fromkeys(texts) if t and t.strip()]
        prompts = [self.template.format(caption=t.strip()) for t in asked]
        answers = self._ask(prompts, lambda _, raw: read_keywords(raw))
        verdicts: dict[str, KeywordSet | None] = dict.fromkeys(texts, _EMPTY)
        verdicts.update(zip(asked, answers, strict=True))
        return verdicts


_EMPTY = KeywordSet(frozenset(), False)
# What the paired prompt shows for a side without text (e.g. a failed prediction). That
# side's verdict is then no keywords and normal, whatever the judge wrote for it.
NO_DESCRIPTION = "(no description)"


@dataclass(frozen=True)
class PairedVerdict:
    """The paired judge's whole answer on one pair.

    ``reference``/``prediction``: the standardized keywords, normalized, and the labels.
    ``labels_agree``: whether the judge said the labels agree (None: it did not say).
    ``raw``: side ("reference", "prediction") -> category -> raw keywords as written.
    """

    reference: KeywordSet
    prediction: KeywordSet
    labels_agree: bool | None = None
    raw: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)


class LLMPairedCaptionJudge(_LLMJudge):
    """Captioning judge, one request per (reference, prediction) pair (``protocol:
    paired``, the paper's): both captions' keywords standardized together, both labels.

    Implements the paired caption-judge interface (``judge_pair``, ``judge_pairs``,
    ``identity``); ``paired_verdicts`` gives the whole answer (raw keywords, agreement).
    A pair the judge could not answer or whose answer could not be read (within
    ``max_failure_rate``) has no verdict: None, counted in ``usage``. It has no
    ``extract``: a caption alone is not what it judges.
    """

    task = "captioning"
    protocol = "paired"
    answer_tokens = 350  # both captions' keywords and both labels

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict:
        """The (reference, prediction) KeywordSets of one pair; None: no verdict."""
        return self.judge_pairs([(reference, prediction)])[0]

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        """Every pair's KeywordSets, the requests sent concurrently; None: no verdict."""
        return [
            None if verdict is None else (verdict.reference, verdict.prediction)
            for verdict in self.paired_verdicts(pairs)
        ]

    def paired_verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[PairedVerdict | None]:
        """Every pair's whole verdict; a pair of two empty captions needs no request."""
        cleaned = [(_text(reference), _text(prediction)) for reference, prediction in pairs]
        asked = [pair for pair in dict.fromkeys(cleaned) if any(pair)]
        prompts = [self._prompt(*pair) for pair in asked]
        answers = self._ask(prompts, lambda _, raw: read_paired(raw))
        verdicts: dict[tuple[str, str], PairedVerdict | None] = {
            ("", ""): PairedVerdict(_EMPTY, _EMPTY)
        }
        for (reference, prediction), verdict in zip(asked, answers, strict=True):
            if verdict is not None:
                verdict = _blank_empty_sides(verdict, reference, prediction)
                self.counts["label_conflicts"] += _label_conflict(verdict)
            verdicts[(reference, prediction)] = verdict
        return [verdicts[pair] for pair in cleaned]

    def _prompt(self, reference: str, prediction: str) -> str:
        return self.template.format(
            reference=reference or NO_DESCRIPTION, prediction=prediction or NO_DESCRIPTION
        )

    def request_prompts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (two empty captions: none)."""
        cleaned = [(_text(reference), _text(prediction)) for reference, prediction in pairs]
        return list(dict.fromkeys(self._prompt(*pair) for pair in cleaned if any(pair)))


def _text(caption: Any) -> str:
    return " ".join(str(caption or "").split())


def _blank_empty_sides(verdict: PairedVerdict, reference: str, prediction: str) -> PairedVerdict:
    """A side without text has no keywords and is normal, whatever the judge wrote."""
    return PairedVerdict(
        verdict.reference if reference else _EMPTY,
        verdict.prediction if prediction else _EMPTY,
        verdict.labels_agree,
        verdict.raw,
    )


def _label_conflict(verdict: PairedVerdict) -> int:
    """1 when the judge's stated agreement contradicts its two labels (the labels count)."""
    if verdict.labels_agree is None:
        return 0
    same = verdict.reference.abnormal == verdict.prediction.abnormal
    return int(same != verdict.labels_agree)


class LLMDiagnosisJudge(_LLMJudge):
    """Diagnosis judge: which ranked candidate first names the reference's disease.

    Implements the scorer's diagnosis-judge interface (``match_ranked``,
    ``match_ranked_many``, ``identity``). An image the judge could not decide (within
    ``max_failure_rate``) counts as not matched.
    """

    task = "diagnosis"
    protocol = DIAGNOSIS_PROTOCOL
    answer_tokens = 12  # one rank in a small JSON object

    def match_ranked(self, ranked: Sequence[str], reference: str) -> tuple[bool, bool]:
        return self.match_ranked_many([(ranked, reference)])[0]

    def judge_ranked(self, ranked: Sequence[str], reference: str) -> RankedVerdict:
        return self.judge_ranked_many([(ranked, reference)])[0]

    def judge_ranked_many(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[RankedVerdict]:
        """Each pair's verdict; a failed request or an unreadable answer is undecided and
        marked ``failed`` (counted, never taken as "no match")."""
        out = []
        for rank in self._ranks(pairs):
            if rank is None:
                out.append(RankedVerdict("undecided", "undecided", self.name, failed=True))
            else:
                top1: Verdict = "match" if rank == 1 else "no_match"
                top5: Verdict = "match" if 1 <= rank <= 5 else "no_match"
                out.append(RankedVerdict(top1, top5, self.name))
        return out

    def match_ranked_many(
        self, pairs: Sequence[tuple[Sequence[str], str]]
    ) -> list[tuple[bool, bool]]:
        """(Top-1, Top-5) correctness of each (ranked candidates, reference) pair."""
        return [verdict.scored for verdict in self.judge_ranked_many(pairs)]

    def _ranks(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[int | None]:
        """Per pair, the rank of the first candidate that names the reference (0: none
        does); None: no verdict (a failed request, an unreadable answer). A pair without a
        candidate is no match (0)."""
        prompts: list[str | None] = []
        counts: list[int] = []
        for ranked, reference in pairs:
            prompt, n = self._prompt(ranked, reference)
            prompts.append(prompt)
            counts.append(n)
        asked = [p for p in prompts if p is not None]
        # The rank must name one of the candidates of *its* prompt.
        listed = {p: n for p, n in zip(prompts, counts, strict=True) if p is not None}
        verdicts = dict(
            zip(
                asked,
                self._ask(asked, lambda prompt, raw: read_first_match(raw, listed[prompt])),
                strict=True,
            )
        )
        return [verdicts.get(prompt) if prompt is not None else 0 for prompt in prompts]

    def _prompt(self, ranked: Sequence[str], reference: str) -> tuple[str | None, int]:
        """The prompt of one ranked list and the candidates it lists (none: no prompt)."""
        # One line per candidate, so that the numbering stays unambiguous.
        top = [" ".join(str(item).split()) for item in list(ranked)[:5]]
        top = [item for item in top if item]
        if not top:
            return None, 0
        candidates = "\n".join(f"{i}. {item}" for i, item in enumerate(top, start=1))
        reference = " ".join(str(reference).split())
        return self.template.format(reference=reference, candidates=candidates), len(top)

    def request_prompts(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (a list without a candidate:
        none)."""
        prompts = (self._prompt(ranked, reference)[0] for ranked, reference in pairs)
        return list(dict.fromkeys(p for p in prompts if p is not None))


# --- reading answers --------------------------------------------------------------------------


def _json_object(raw: str) -> dict[str, Any]:
    """The first JSON object in an answer (fences, prose, single quotes, trailing commas)."""
    for span in json_spans(raw):
        data = load_lenient(span)
        if isinstance(data, dict):
            return data
    raise UnreadableAnswer("no JSON object")


def _key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


_CATEGORIES = {
    "sequence": "sequence",
    "sequences": "sequence",
    "mri_sequence": "sequence",
    "mri_sequences": "sequence",
    "plane": "plane",
    "planes": "plane",
    "imaging_plane": "plane",
    "anatomy": "anatomy",
    "anatomical_locations": "anatomy",
    "location": "anatomy",
    "locations": "anatomy",
    "characteristics": "characteristics",
    "imaging_characteristics": "characteristics",
    "findings": "findings",
    "finding": "findings",
    "diseases": "findings",
    "findings_diseases": "findings",
    "negated_findings": "negated",
    "negated": "negated",
    "negative_findings": "negated",
    "absent_findings": "negated",
    # The paired prompt's fifth category holds both.
    "sequence_and_plane": "modality",
    "sequences_and_planes": "modality",
    "sequence_plane": "modality",
    "sequence_and_planes": "modality",
    "modality": "modality",
}
_LABEL_KEYS = ("label", "classification", "normal_abnormal", "status")
_ABNORMAL_KEYS = ("abnormal", "is_abnormal")
# Leading negations an LLM may leave on a negated finding ("no hemorrhage"). Not "absent"
# or "absence of": "absent septum pellucidum" is a finding.
_NEGATION = re.compile(r"^(?:no|not|without|negative for|free of)\s+")
_EDGE_PUNCTUATION = " .,;:!?\"'`()[]{}"


def clean_keyword(text: Any) -> str:
    """Lower case, NFKC, hyphens/underscores/slashes as spaces, single spaces, no edge
    punctuation: "Ring-enhancing " and "ring enhancing" are one keyword."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = re.sub(r"[-‐‑‒–—_/]+", " ", text)
    return " ".join(text.split()).strip(_EDGE_PUNCTUATION)


# Sequence names onto the words of the benchmark's modality set (and the keyword judge's
# other sequence keys). A small table rather than a library: the targets are the
# benchmark's own words. Applied to the cleaned keyword (hyphens already spaces).
_SEQUENCE_WORDS: tuple[tuple[str, str], ...] = (
    (r"\bdti\b|diffusion tensor|tractograph|fractional anisotropy", "dti"),
    (r"\bdwi\b|diffusion weighted|^diffusion$|\bb ?1000\b", "dwi"),
    (r"\badc\b|apparent diffusion", "adc"),
    (r"\bswi\b|susceptibility", "swi"),
    (r"\bstir\b|short tau", "stir"),
    (r"\bpdw?\b|proton density", "pd"),
    (r"perfusion|\bdsc\b|\basl\b|\bcbv\b", "perfusion"),
)
_PRE_CONTRAST = re.compile(
    r"\bpre ?contrast|\bnon ?contrast|\bunenhanced|\bnon ?enhanced|before contrast|"
    r"without contrast|pre gadolinium"
)
_POST_CONTRAST = re.compile(
    r"\bpost ?contrast|gadolinium|\bgd\b|\bgado\b|contrast enhanced|\+ ?c\b|\bc ?\+|"
    r"after contrast|with contrast|\bpost gd\b"
)
_T1 = re.compile(r"\bt1(?:w|wi)?\b|\bt1 weighted|\bmp ?rage\b|\bspgr\b")
_FLAIR = re.compile(r"\bflair\b|fluid attenuated inversion")
_T2_STAR = re.compile(r"\bt2 ?\*|\bgre\b|gradient (?:recalled )?echo")
_T2 = re.compile(r"\bt2(?:w|wi)?\b|\bt2 weighted")
_PLANES = (
    (re.compile(r"\baxial\b|\btransverse\b|\btrans ?axial\b"), "axial"),
    (re.compile(r"\bcoronal\b"), "coronal"),
    (re.compile(r"\bsagittal\b"), "sagittal"),
)


def sequence_keywords(text: Any) -> set[str]:
    """One sequence keyword -> benchmark words: "T1-weighted post-gadolinium" gives
    {"t1", "post-contrast"}, "T2-FLAIR" {"flair"}; unknown names stay as cleaned."""
    cleaned = clean_keyword(text)
    if not cleaned:
        return set()
    found: set[str] = set()
    # "T1-FLAIR" is a T1 sequence, "T2-FLAIR" a FLAIR one (as in the keyword lexicon).
    if _T1.search(cleaned):
        found.add("t1")
    elif _FLAIR.search(cleaned):
        found.add("flair")
    elif _T2_STAR.search(cleaned):
        found.add("t2*")
    elif _T2.search(cleaned):
        found.add("t2")
    found.update(key for pattern, key in _SEQUENCE_WORDS if re.search(pattern, cleaned))
    if "dti" in found:
        found.discard("dwi")  # "diffusion tensor" is not diffusion-weighted imaging
    if _PRE_CONTRAST.search(cleaned):
        found.add("pre-contrast")
    elif _POST_CONTRAST.search(cleaned):
        found.add("post-contrast")
    return found or {cleaned}


def plane_keywords(text: Any) -> set[str]:
    cleaned = clean_keyword(text)
    found = {key for pattern, key in _PLANES if pattern.search(cleaned)}
    return found or ({cleaned} if cleaned else set())


def modality_keywords(text: Any) -> set[str]:
    """One keyword of the combined sequence-and-plane category: its planes, and the
    sequence words of the rest ("axial FLAIR" gives {"axial", "flair"})."""
    cleaned = clean_keyword(text)
    planes = {key for pattern, key in _PLANES if pattern.search(cleaned)}
    rest = cleaned
    for pattern, _ in _PLANES:
        rest = pattern.sub(" ", rest)
    rest = " ".join(rest.split())
    return planes | (sequence_keywords(rest) if rest else set())


def _items(value: Any) -> list[str]:
    """A category's keywords: a list, or one comma/semicolon-separated string, or nothing."""
    if value is None:
        return []
    if isinstance(value, str):
        value = re.split(r"[;,\n]", value)
    if isinstance(value, dict):
        value = list(value)
    if not isinstance(value, list | tuple):
        raise UnreadableAnswer(f"a keyword list is a {type(value).__name__}")
    return [str(v) for v in value if v is not None and not isinstance(v, list | dict)]


def _label_word(value: Any) -> bool:
    """ "abnormal" -> True, "normal" -> False; anything else (a bool too) is unreadable."""
    word = clean_keyword(value)
    if not isinstance(value, bool):
        if word in ("abnormal", "abnormality", "pathological"):
            return True
        if word == "normal":
            return False
    raise UnreadableAnswer(f"label {value!r} is neither normal nor abnormal")


def _label(data: dict[str, Any]) -> bool:
    for key in _LABEL_KEYS:
        if key in data:
            return _label_word(data[key])
    for key in _ABNORMAL_KEYS:
        if isinstance(data.get(key), bool):
            return data[key]
    raise UnreadableAnswer("no normal/abnormal label")


def _keyword_set(categories: Mapping[str, Any], abnormal: bool) -> KeywordSet:
    """Keyword lists by category (keys already passed through ``_key``; unknown keys
    ignored) -> normalized KeywordSet."""
    keywords: set[str] = set()
    for key, value in categories.items():
        category = _CATEGORIES.get(key)
        if category is None:
            continue
        for item in _items(value):
            if category == "sequence":
                keywords |= sequence_keywords(item)
            elif category == "plane":
                keywords |= plane_keywords(item)
            elif category == "modality":
                keywords |= modality_keywords(item)
            else:
                cleaned = clean_keyword(item)
                stripped = _NEGATION.sub("", cleaned)
                if category == "negated" or stripped != cleaned:
                    # A finding written as "no hemorrhage" is a negated one, whatever list.
                    if stripped:
                        keywords.add(NEGATED_PREFIX + stripped)
                elif cleaned:
                    keywords.add(cleaned)
    return KeywordSet(frozenset(keywords), abnormal)


def read_keywords(raw: str) -> KeywordSet:
    """A keyword judge's answer -> normalized KeywordSet; UnreadableAnswer if not possible."""
    data = {_key(k): v for k, v in _json_object(raw).items()}
    abnormal = _label(data)
    if not any(k in _CATEGORIES for k in data):
        raise UnreadableAnswer("no keyword category")
    return _keyword_set(data, abnormal)


# --- reading a paired answer ------------------------------------------------------------------

# The names an LLM may give the two sides and the sections of a paired answer.
_SIDES = {
    "gt": "reference",
    "ground_truth": "reference",
    "reference": "reference",
    "ref": "reference",
    "pred": "prediction",
    "prediction": "prediction",
    "predicted": "prediction",
}
_STANDARDIZED = (
    "standardized_keywords",
    "standardised_keywords",
    "standardized",
    "standardised",
    "normalized_keywords",
    "normalised_keywords",
)
_RAW = ("raw_keywords", "raw", "extracted_keywords")
_AGREEMENT = ("labels_agree", "label_agreement", "agreement", "labels_match", "agree")
_YES = {"yes", "true", "agree", "agreement", "match", "same"}
_NO = {"no", "false", "disagree", "disagreement", "mismatch", "different"}


def _keyed(value: Any) -> dict[str, Any] | None:
    return {_key(k): v for k, v in value.items()} if isinstance(value, dict) else None


def _side_section(data: dict[str, Any], names: Sequence[str], side: str) -> dict | None:
    """``side``'s block of a section, nested either way or flattened: {section: {gt: ..}},
    {gt: {section: ..}} or {gt_section: ..}; None if absent."""
    aliases = [alias for alias, s in _SIDES.items() if s == side]
    for name in names:
        for alias in aliases:
            for candidate in (
                (_keyed(data.get(name)) or {}).get(alias),
                (_keyed(data.get(alias)) or {}).get(name),
                data.get(f"{alias}_{name}"),
                data.get(f"{name}_{alias}"),
            ):
                if isinstance(candidate, dict):
                    return _keyed(candidate)
    return None


def _side_label(data: dict[str, Any], side: str) -> bool:
    """``side``'s normal/abnormal label: gt_label, labels.gt, or gt.label."""
    aliases = [alias for alias, s in _SIDES.items() if s == side]
    for alias in aliases:
        for candidate in (
            data.get(f"{alias}_label"),
            data.get(f"label_{alias}"),
            (_keyed(data.get("labels")) or {}).get(alias),
            (_keyed(data.get(alias)) or {}).get("label"),
        ):
            if candidate is not None:
                return _label_word(candidate)
    raise UnreadableAnswer(f"no normal/abnormal label of the {side}")


def _agreement(data: dict[str, Any]) -> bool | None:
    for key in _AGREEMENT:
        value = (_keyed(data.get("labels")) or {}).get(key, data.get(key))
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and clean_keyword(value) in _YES | _NO:
            return clean_keyword(value) in _YES
    return None


def _raw_lists(block: dict[str, Any] | None) -> dict[str, tuple[str, ...]]:
    if not block:
        return {}
    return {key: tuple(_items(value)) for key, value in block.items() if key in _CATEGORIES}


def read_paired(raw: str) -> PairedVerdict:
    """A paired judge's answer -> both sides' standardized keywords (normalized), their
    labels, the stated agreement and the raw keywords; UnreadableAnswer if not possible.

    The standardized keywords and both labels are required (falling back to the raw
    keywords would score a pair the judge did not standardize); raw keywords and the
    agreement are read where present.
    """
    data = _keyed(_json_object(raw)) or {}
    sides: dict[str, KeywordSet] = {}
    for side in ("reference", "prediction"):
        block = _side_section(data, _STANDARDIZED, side)
        if block is None:
            raise UnreadableAnswer(f"no standardized keywords of the {side}")
        if block and not any(k in _CATEGORIES for k in block):
            raise UnreadableAnswer(f"no keyword category in the {side}'s standardized keywords")
        sides[side] = _keyword_set(block, _side_label(data, side))
    raw_keywords = {side: _raw_lists(_side_section(data, _RAW, side)) for side in sides}
    return PairedVerdict(sides["reference"], sides["prediction"], _agreement(data), raw_keywords)


_NONE_WORDS = {"", "none", "null", "no", "no match", "n a", "na", "0"}


def read_first_match(raw: str, candidates: int) -> int:
    """A diagnosis judge's answer -> the first matching rank (0: none); UnreadableAnswer
    if it is not a rank between 0 and ``candidates``."""
    try:
        data = {_key(k): v for k, v in _json_object(raw).items()}
    except UnreadableAnswer:
        bare = raw.strip().strip(_EDGE_PUNCTUATION)
        if not re.fullmatch(r"\d", bare):
            raise
        data = {"first_match": int(bare)}
    for key in ("first_match", "match", "first_matching_rank", "rank", "answer"):
        if key in data:
            value = data[key]
            break
    else:
        raise UnreadableAnswer("no first_match")
    if isinstance(value, bool):
        raise UnreadableAnswer(f"first_match {value!r} is not a rank")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is None or (isinstance(value, str) and clean_keyword(value) in _NONE_WORDS):
        return 0
    try:
        rank = int(str(value).strip())
    except ValueError:
        raise UnreadableAnswer(f"first_match {value!r} is not a rank") from None
    if not 0 <= rank <= candidates:
        raise UnreadableAnswer(f"first_match {rank} is not between 0 and {candidates}")
    return rank


# --- construction ---------------------------------------------------------------------------


#: (task, protocol) -> the judge class; a diagnosis judge has one protocol.
JUDGES: dict[tuple[str, str], type[_LLMJudge]] = {
    ("captioning", "paired"): LLMPairedCaptionJudge,
    ("captioning", "per-caption"): LLMKeywordJudge,
    ("diagnosis", DIAGNOSIS_PROTOCOL): LLMDiagnosisJudge,
}


def make_llm_judge(
    name: str,
    settings: dict[str, Any],
    task: str | None,
    cache_dir: Path | None = None,
    resolve: Callable[[str], str] | None = None,
) -> _LLMJudge:
    """The ``llm`` judge of config ``judges.<name>`` for ``task`` (captioning or diagnosis),
    asking the way ``settings.protocol`` says (captioning: paired by default)."""
    if task not in tuple(TASK_PROTOCOLS):
        raise ConfigError(
            f"judges.{name}: an llm judge judges captioning or diagnosis, not {task!r}",
            "build it for the task it judges (make_judge(..., task=...))",
        )
    protocol = task_protocol(task, settings.get("protocol", DEFAULT_PROTOCOL))
    return JUDGES[(task, protocol)](name, settings, cache_dir=cache_dir, resolve=resolve)


@register_judge_kind
class LLMKind(JudgeKind):
    """``kind: llm``: a chat model behind an OpenAI-compatible endpoint (this module)."""

    name = "llm"
    tasks = tuple(TASK_PROTOCOLS)
    settings_schema = SETTINGS_SCHEMA
    remote = True

    def check_settings(self, name, settings, resolve) -> None:
        resolved = check_settings(name, dict(settings), resolve)
        for task, path in resolved["prompts"].items():
            read_prompt(name, task, path, resolved["protocol"])

    def build(self, name, settings, task, cache_dir=None) -> _LLMJudge:
        return make_llm_judge(name, dict(settings), task, cache_dir)

    def input_files(self, name, settings, task, resolve) -> list[str]:
        return [prompt_paths(name, dict(settings), resolve)[task]]

    def environment_problems(self, name, settings, tasks, resolve) -> list[NovaError]:
        backend = check_settings(name, dict(settings), resolve)["backend"]
        problem = _endpoint_problem(name, backend)
        return [] if problem is None else [problem]

    def api_resource(self, settings) -> str:
        return api_resource(dict(settings))

    def service_requests(self, judge_cfg, judge) -> list[ServiceRequests]:
        return [judge.service_requests(judge_cfg["name"])]
