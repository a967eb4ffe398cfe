"""``kind: cascade``: an offline judge decides what it can, a second judge the rest.

A cascade names two configured judges: ``first`` (typically the offline diagnosis matcher
or the keyword lexicon) and ``second`` (typically the paper's LLM judge, or one served by
vLLM or Ollama through the same OpenAI-compatible backend). The second judge is asked
only where the first cannot answer, so a run costs a fraction of the LLM judge's requests:

- **Diagnosis.** The first judge gives every ranked list its three-valued verdict
  (:class:`~novabench.judges.base.RankedVerdict`); exactly the lists it left undecided
  (Top-1 or Top-5 undecided) go, in one batch, to the second, whose verdict is the item's.
  ``RankedVerdict.judge`` names the stage that decided. A failed or unreadable request of
  the second stays undecided with ``failed=True``: counted, never a verdict.
- **Captioning.** Pairs the first judge gave no verdict on go to the second (a paired LLM
  caption judge), and so do, by the settings given (at least one):
  ``max_keyword_doubt``, pairs whose keyword doubt (the Clinical F1 points their unread
  words could move, :func:`novabench.caption_keywords.pair_doubt`) is above it, or that
  have none (a first judge that does not count unread words); ``unread_share_threshold``,
  pairs where the first could not read more than that share of either caption's content
  words (``KeywordSet.unread_share``; None counts as 0). The other pairs keep the first's
  keywords.

Each stage is built as it would be alone, so the second's requests are cached under its
own name like every judge request (``<cache>/judges/<second>/``): a re-run sends nothing,
and the answers are shared with the second judge used on its own. The cascade's identity
holds both stages' identities and the bounds it was given; its ``usage()`` says how many items each
stage decided (``decided_by``) besides the second's request counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from novabench.caption_keywords import CONFIDENT_DOUBT, pair_doubt
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import ConfigError, NovaError
from novabench.judges.base import (
    JudgeKind,
    PairVerdict,
    RankedVerdict,
    ServiceRequests,
    judge_caption_pairs,
    judge_kind,
    judge_ranked,
    make_judge,
    register_judge_kind,
)

KIND = "cascade"
STAGES = ("first", "second")
THRESHOLD = "unread_share_threshold"
MAX_DOUBT = "max_keyword_doubt"
FIX = "see the cascade judge in config/README.md"


def _stage(settings: Mapping[str, Any], stage: str, name: str) -> dict[str, Any]:
    """A stage as :func:`~novabench.judges.base.expand_judge` writes it out."""
    value = settings.get(stage)
    if not isinstance(value, Mapping) or "kind" not in value:
        raise ConfigError(
            f"judges.{name}.settings.{stage}: the cascade's stages are not written out",
            "build the cascade from the whole config (novabench.judges.base.expand_judge)",
        )
    return dict(value)


class _Cascade:
    """What both tasks' cascades share: the stages, the counts, the identity."""

    task: ClassVar[str]
    #: The first judge escalates by what it could not read: the cascade's settings must
    #: say how much is too much (unread_share_threshold or max_keyword_doubt).
    needs_threshold: ClassVar[bool] = False

    def __init__(self, name: str, settings: Mapping[str, Any], cache_dir: Path | None = None):
        self.name = name
        self.first_cfg = _stage(settings, "first", name)
        self.second_cfg = _stage(settings, "second", name)
        # Each built as it would be alone: its own settings, checks and cache folder.
        self.first = make_judge(self.first_cfg, self.task, cache_dir)
        self.second = make_judge(self.second_cfg, self.task, cache_dir)
        self.first_name, self.second_name = self.first_cfg["name"], self.second_cfg["name"]
        # Items decided per stage, items sent to the second, items left without a verdict.
        self.decided_by: Counter[str] = Counter()
        self.n_escalated = 0
        self.undecided = 0

    def _identity(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        first, second = self.first.identity(), self.second.identity()
        return {
            "name": f"cascade({first.get('name', self.first_name)} -> "
            f"{second.get('name', self.second_name)})",
            "code": code_fingerprint(__name__),
            "kind": KIND,
            "judge": self.name,
            "task": self.task,
            "first": {"judge": self.first_name, **first},
            "second": {"judge": self.second_name, **second},
            **extra,
        }

    def escalated(self, pairs: Sequence[Any]) -> list[int]:
        """Indices of the pairs the first judge leaves to the second."""
        return self.escalated_pairs(self.first_verdicts(pairs))

    def live_check(self) -> list[dict[str, Any]]:
        """The live checks of the stages that have one (an LLM stage's hand-labelled
        sample, :mod:`novabench.judges.llm.live_check`), first stage first."""
        return [
            record
            for stage in (self.first, self.second)
            if hasattr(stage, "live_check")
            for record in stage.live_check()
        ]

    def usage(self) -> dict[str, Any]:
        """The second judge's requests (``requests``, ``cached``, ``sent``, ``failed``,
        tokens, ``cost_usd`` as an LLM judge counts them), and per stage the items it
        decided (``decided_by``), the items sent on (``escalated``) and those left
        undecided (``undecided``, failed requests among them)."""
        usage = dict(self.second.usage()) if hasattr(self.second, "usage") else {}
        return {
            **usage,
            "decided_by": {
                self.first_name: int(self.decided_by[self.first_name]),
                self.second_name: int(self.decided_by[self.second_name]),
            },
            "escalated": self.n_escalated,
            "undecided": self.undecided,
        }


class CascadeDiagnosisJudge(_Cascade):
    """Diagnosis: the first judge's decided verdicts, the second's on the rest."""

    task = "diagnosis"

    def __init__(self, name: str, settings: Mapping[str, Any], cache_dir: Path | None = None):
        super().__init__(name, settings, cache_dir)
        # Distinct labels are counted the first judge's way where it has one (the matcher).
        for stage in (self.first, self.second):
            if hasattr(stage, "canonical_label"):
                self.canonical_label = stage.canonical_label
                break

    def identity(self) -> dict[str, Any]:
        return self._identity({})

    def first_verdicts(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[RankedVerdict]:
        """The first stage's verdict on every pair (what the estimate counts from)."""
        return [
            replace(verdict, judge=self.first_name)
            for verdict in judge_ranked(self.first, pairs, self.first_name)
        ]

    @staticmethod
    def escalated_pairs(verdicts: Sequence[RankedVerdict]) -> list[int]:
        """Indices of the verdicts left undecided (Top-1 or Top-5): the second's."""
        return [i for i, verdict in enumerate(verdicts) if not verdict.decided]

    def judge_ranked_many(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[RankedVerdict]:
        pairs = list(pairs)
        verdicts = self.first_verdicts(pairs)
        undecided = self.escalated_pairs(verdicts)
        self.n_escalated += len(undecided)
        if undecided:  # one batch: an LLM judge sends it concurrently, each prompt once
            answers = judge_ranked(self.second, [pairs[i] for i in undecided], self.second_name)
            for i, answer in zip(undecided, answers, strict=True):
                if answer.failed:
                    # What the first stage decided stands; the rest stays undecided, failed.
                    verdicts[i] = replace(verdicts[i], failed=True)
                else:
                    verdicts[i] = replace(answer, judge=self.second_name)
        for verdict in verdicts:
            if verdict.decided:
                self.decided_by[verdict.judge] += 1
            else:
                self.undecided += 1
        return verdicts

    def judge_ranked(self, ranked: Sequence[str], reference: str) -> RankedVerdict:
        return self.judge_ranked_many([(ranked, reference)])[0]

    def match_ranked_many(
        self, pairs: Sequence[tuple[Sequence[str], str]]
    ) -> list[tuple[bool, bool]]:
        """Two-valued (Top-1, Top-5) for scorers that read booleans: only a match is
        True; what stayed undecided is counted in ``usage()``."""
        return [verdict.scored for verdict in self.judge_ranked_many(pairs)]

    def match_ranked(self, ranked: Sequence[str], reference: str) -> tuple[bool, bool]:
        return self.match_ranked_many([(ranked, reference)])[0]


def unread_share(verdict: PairVerdict) -> float:
    """The larger share of unread content words of a pair's two captions (None: 0)."""
    if verdict is None:
        return 1.0
    return max(side.unread_share or 0.0 for side in verdict)


class CascadeCaptionJudge(_Cascade):
    """Captioning: the first judge's keywords, the second's where the first's doubt or
    unread share is above the settings' bound (or it gave no verdict)."""

    task = "captioning"
    needs_threshold = True

    def __init__(self, name: str, settings: Mapping[str, Any], cache_dir: Path | None = None):
        super().__init__(name, settings, cache_dir)
        self.bounds = {
            key: float(settings[key]) for key in (THRESHOLD, MAX_DOUBT) if key in settings
        }

    def identity(self) -> dict[str, Any]:
        return self._identity(self.bounds)

    def _doubtful(self, verdict: PairVerdict) -> bool:
        if verdict is None:
            return True
        if THRESHOLD in self.bounds and unread_share(verdict) > self.bounds[THRESHOLD]:
            return True
        if MAX_DOUBT in self.bounds:
            doubt = pair_doubt(*verdict)
            return doubt is None or doubt > self.bounds[MAX_DOUBT]
        return False

    def escalated_pairs(self, verdicts: Sequence[PairVerdict]) -> list[int]:
        """Indices of the pairs that go to the second judge."""
        return [i for i, verdict in enumerate(verdicts) if self._doubtful(verdict)]

    def first_verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        return judge_caption_pairs(self.first, pairs)

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        pairs = list(pairs)
        verdicts = self.first_verdicts(pairs)
        escalated = self.escalated_pairs(verdicts)
        self.n_escalated += len(escalated)
        decided = [self.first_name] * len(pairs)
        if escalated:
            answers = judge_caption_pairs(self.second, [pairs[i] for i in escalated])
            for i, answer in zip(escalated, answers, strict=True):
                # A failed second request leaves the first stage's keywords (counted as a
                # failure by the second judge, never as its verdict).
                if answer is not None or verdicts[i] is None:
                    verdicts[i], decided[i] = answer, self.second_name
        for verdict, stage in zip(verdicts, decided, strict=True):
            if verdict is None:
                self.undecided += 1
            else:
                self.decided_by[stage] += 1
        return verdicts

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict:
        return self.judge_pairs([(reference, prediction)])[0]


JUDGES = {"diagnosis": CascadeDiagnosisJudge, "captioning": CascadeCaptionJudge}


@register_judge_kind
class CascadeKind(JudgeKind):
    """``kind: cascade``: two configured judges, the second asked where the first cannot
    decide (this module)."""

    name = KIND
    tasks = tuple(JUDGES)  # the tasks it has a cascade of
    # The settings as the config writes them: the stages by name.
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": list(STAGES),
        "properties": {
            "first": {"type": "string", "minLength": 1},
            "second": {"type": "string", "minLength": 1},
            THRESHOLD: {"type": "number", "minimum": 0, "maximum": 1},
            MAX_DOUBT: {"type": "number", "minimum": 0, "maximum": 100},
        },
    }
    # Its second stage usually calls a service; its environment_problems say whether.
    remote = True

    def expand_settings(self, name, settings, judges) -> dict[str, Any]:
        out = dict(settings)
        for stage in STAGES:
            target = settings.get(stage)
            key = f"judges.{name}.settings.{stage}"
            if not isinstance(target, str):
                continue  # the schema check names it
            if target == name:
                raise ConfigError(f"{key} names the cascade itself", "name another judge")
            if target not in judges:
                raise ConfigError(
                    f"{key} names {target!r}, which is not under judges:",
                    "add it under judges: or name an existing judge",
                )
            if judges[target].get("kind") == KIND:
                raise ConfigError(
                    f"{key} names {target!r}, another cascade",
                    "name a judge of another kind (a cascade has two stages, not more)",
                )
            out[stage] = {
                "name": target,
                "kind": judges[target]["kind"],
                "settings": dict(judges[target].get("settings") or {}),
            }
        return out

    def stages(self, settings) -> list[dict[str, Any]]:
        return [s for s in (settings.get(k) for k in STAGES) if isinstance(s, Mapping)]

    def _stages(self, name, settings) -> list[tuple[dict[str, Any], JudgeKind]]:
        out = []
        for stage in STAGES:
            cfg = _stage(settings, stage, name)
            out.append((cfg, judge_kind(cfg["kind"])))
        return out

    def check_task(self, key, name, settings, task) -> None:
        super().check_task(key, name, settings, task)
        for stage, (cfg, kind) in zip(STAGES, self._stages(name, settings), strict=True):
            kind.check_task(f"judges.{name}.settings.{stage}", cfg["name"], cfg["settings"], task)
        if JUDGES[task].needs_threshold and not {THRESHOLD, MAX_DOUBT} & set(settings):
            raise ConfigError(
                f"judges.{name}.settings.{MAX_DOUBT} is not set (nor {THRESHOLD}): a "
                "captioning cascade sends a pair to its second judge when the first's "
                "keyword doubt is above it",
                f"set judges.{name}.settings.{MAX_DOUBT} (Clinical F1 points, 0 to 100; "
                f"{CONFIDENT_DOUBT:g} is the confident bound)",
            )

    def build(self, name, settings, task, cache_dir=None) -> _Cascade:
        if task not in JUDGES:
            raise ConfigError(
                f"judges.{name}: a cascade judges {' or '.join(JUDGES)}, not {task!r}", FIX
            )
        return JUDGES[task](name, settings, cache_dir)

    def input_files(self, name, settings, task, resolve) -> list[str]:
        files: list[str] = []
        for cfg, kind in self._stages(name, settings):
            files += kind.input_files(cfg["name"], cfg["settings"], task, resolve)
        return list(dict.fromkeys(files))

    def environment_problems(self, name, settings, tasks, resolve) -> list[NovaError]:
        problems: list[NovaError] = []
        for cfg, kind in self._stages(name, settings):
            problems += kind.environment_problems(cfg["name"], cfg["settings"], tasks, resolve)
        return problems

    def api_resource(self, settings) -> str | None:
        # The second stage is the one that calls a service, as a rule; else the first.
        for cfg in reversed(self.stages(settings)):
            resource = judge_kind(cfg["kind"]).api_resource(cfg.get("settings") or {})
            if resource:
                return resource
        return None

    def asks_a_service(self, settings) -> bool:
        return any(
            judge_kind(s["kind"]).asks_a_service(s["settings"]) for s in self.stages(settings)
        )

    def service_requests(self, judge_cfg, judge) -> list[ServiceRequests]:
        """Each stage's requests; the second gets only what an offline first one leaves
        undecided (every pair when the first asks a service too)."""
        first_cfg, second_cfg = self.stages(judge_cfg["settings"])
        first = judge_kind(first_cfg["kind"]).service_requests(first_cfg, judge.first)
        second = judge_kind(second_cfg["kind"]).service_requests(second_cfg, judge.second)
        if not first:
            second = [replace(s, select=judge.escalated, after=judge.first_name) for s in second]
        return first + second

    def labeler(self, settings):
        for cfg in self.stages(settings):
            labeler = judge_kind(cfg["kind"]).labeler(cfg.get("settings") or {})
            if labeler is not None:
                return labeler
        return None
