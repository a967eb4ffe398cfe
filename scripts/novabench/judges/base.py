"""What a judge is, and the registry of judge kinds.

A judge turns free text into what a text metric counts: keywords and a normal/abnormal
label of a caption (captioning), or whether a ranked list of diagnoses names the
reference (diagnosis). Judges are configured like models: ``judges.<name>`` in the config
gives a ``kind`` and its ``settings``. A kind is a :class:`JudgeKind` subclass registered
with :func:`register_judge_kind` in one module of this package; adding a judge is adding
that module. A built judge that can check itself while it reads offers ``live_check()``: a
list of records the reading stage writes into the verdict summary (an LLM judge's
hand-labelled sample, :mod:`novabench.judges.llm.live_check`), raising NovaError past its
bound. Judges import no task and nothing from :mod:`novabench.metrics`: the tasks'
metrics decide what a verdict counts for (the Clinical/Modality split of keywords is
:mod:`novabench.caption_keywords`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, NovaError, settings_error
from novabench.judge_verdicts import (  # noqa: F401  (the judges' interface, re-exported)
    NEGATED_PREFIX,
    CaptionJudge,
    DiagnosisJudge,
    KeywordSet,
    PairedCaptionJudge,
    PairVerdict,
    RankedVerdict,
    Verdict,
    judge_caption_pairs,
    judge_ranked,
    ranked_verdict,
)

Resolve = Callable[[str], str]


@dataclass(frozen=True)
class ServiceRequests:
    """One judge that sends requests to a service, as the cost estimate counts them: a
    judge of its own or a stage of one (a cascade's)."""

    name: str  # the configured judge that asks (a stage's own name)
    judge: Any  # the built judge: ``request_prompts(pairs)`` and ``cached(prompt)``
    #: Which of the task's judged pairs it gets (indices); None: every pair.
    select: Callable[[Sequence[Any]], Sequence[int]] | None
    template: str  # its prompt template (counted with placeholders before predictions)
    system_prompt: str
    prices: tuple[float | None, float | None]  # USD per million input, output tokens
    answer_tokens: int  # tokens of one answer until answers were measured
    requests_per_image: int = 1
    after: str | None = None  # the judge whose undecided items it gets (a second stage)


#: What a reading job asks for unless its judge serves a model itself.
READ_RESOURCES = {"gpu": 0, "cpus": 1, "mem_mb": 2000}


class JudgeKind:
    """A kind of judge: its settings, how to build one, what it needs before a run."""

    name: ClassVar[str]  # the config's `kind`
    tasks: ClassVar[tuple[str, ...]]  # the tasks it can judge (reads the answers of)
    settings_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    #: Whether it calls a service (checked before a run, capped by `api_<provider>`).
    remote: ClassVar[bool] = False

    #: Boolean settings ``novabench score`` sets with a switch of their own: the setting
    #: (``--<setting with dashes>`` / ``--no-<...>``) and the switch's help.
    cli_switches: ClassVar[Mapping[str, str]] = {}

    def missing_dependencies(self, settings: Mapping[str, Any]) -> list[NovaError]:
        """Optional packages that ``settings`` need and that are not installed, one problem
        each naming the fix (checked before the CLI scores); none for most kinds."""
        return []

    def asks_a_service(self, settings: Mapping[str, Any]) -> bool:
        """Whether the judge (``settings`` written out) sends requests that cost: what
        the cost estimate counts. A kind with stages asks its stages."""
        return self.remote

    def service_requests(self, judge_cfg: Mapping[str, Any], judge: Any) -> list[ServiceRequests]:
        """The judges among ``judge`` (built from ``judge_cfg``) that send requests to a
        service, for the cost estimate; none for an offline judge."""
        return []

    def check_settings(self, name: str, settings: Mapping[str, Any], resolve: Resolve) -> None:
        """Raise ConfigError naming ``judges.<name>.settings.<key>``; at plan time."""
        import jsonschema

        try:
            jsonschema.validate(dict(settings), self.settings_schema)
        except jsonschema.ValidationError as exc:
            fix = f"see the {self.name} judge in config/README.md"
            raise settings_error(exc, f"judges.{name}.settings", fix) from None

    def build(
        self,
        name: str,
        settings: Mapping[str, Any],
        task: str,
        cache_dir: Path | None = None,
    ) -> Any:
        """A judge for ``task`` (a :class:`CaptionJudge` or :class:`DiagnosisJudge`)."""
        raise NotImplementedError

    def input_files(
        self, name: str, settings: Mapping[str, Any], task: str, resolve: Resolve
    ) -> list[str]:
        """Files whose content determines the verdicts (editing them re-scores)."""
        return []

    def environment_problems(
        self, name: str, settings: Mapping[str, Any], tasks: Sequence[str], resolve: Resolve
    ) -> list[NovaError]:
        """Before a real run (not a dry run): keys set, endpoints reachable."""
        return []

    def api_resource(self, settings: Mapping[str, Any]) -> str | None:
        """The Snakemake resource ``api_<provider>`` its requests count against."""
        return None

    def labeler(self, settings: Mapping[str, Any]) -> Callable[[str], str] | None:
        """The label function diagnosis counts distinct labels with; None: case-folding."""
        return None

    def check_task(self, key: str, name: str, settings: Mapping[str, Any], task: str) -> None:
        """Raise ConfigError when this judge cannot judge ``task`` (named at ``key``);
        ``settings`` as :func:`expand_judge` writes them out."""
        if task not in self.tasks:
            raise ConfigError(
                f"{key}: judge {name!r} (kind {self.name}) judges {', '.join(self.tasks)}, "
                f"not {task}",
                f"name a judge of a kind that judges {task}",
            )

    def expand_settings(
        self, name: str, settings: Mapping[str, Any], judges: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The settings with the other judges they name (``judges``: the config's
        ``judges:``) written out, as every other method here receives them; ConfigError
        naming the key where a name is wrong. Most kinds name no other judge."""
        return dict(settings)

    def stages(self, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The judges this one runs, ``{name, kind, settings}`` each (a cascade's two)."""
        return []

    def job_resources(self, settings: Mapping[str, Any]) -> dict[str, int]:
        """What a reading job of the judge (``settings`` written out) asks the scheduler
        for: ``gpu``, ``cpus``, ``mem_mb`` (a judge it serves itself); the most any of
        its stages needs."""
        needs = [judge_kind(s["kind"]).job_resources(s["settings"]) for s in self.stages(settings)]
        return {k: max([n[k] for n in needs], default=d) for k, d in READ_RESOURCES.items()}


_KINDS: dict[str, JudgeKind] = {}


def register_judge_kind(cls: type[JudgeKind]) -> type[JudgeKind]:
    """Class decorator: register a judge kind under ``cls.name``."""
    _KINDS[cls.name] = cls()
    return cls


def _discover() -> None:
    """Import every module of this package once, so each registers its kinds."""
    import novabench.judges as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def judge_kinds() -> dict[str, JudgeKind]:
    _discover()
    return dict(_KINDS)


def judge_kind(kind: str) -> JudgeKind:
    if kind not in _KINDS:
        _discover()
    if kind not in _KINDS:
        raise ConfigError(
            f"no judge kind called {kind!r}", f"use one of {', '.join(sorted(_KINDS))}"
        )
    return _KINDS[kind]


def expand_judge(judges: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Any]:
    """``judges.<name>`` as ``{name, kind, settings, ...}``, the judges its settings name
    written out (:meth:`JudgeKind.expand_settings`): what building, checking and
    fingerprinting a judge needs, since a kind sees no other part of the config."""
    if name not in judges:
        raise ConfigError(f"no judge called {name!r} under judges:", "add it or fix the name")
    judge = judges[name]
    settings = judge_kind(judge["kind"]).expand_settings(name, judge.get("settings") or {}, judges)
    return {"name": name, **judge, "settings": settings}


def judge_kind_names(judge_cfg: Mapping[str, Any]) -> list[str]:
    """The kinds a judge runs (``judge_cfg`` written out): its own, then its stages'."""
    kind = judge_kind(judge_cfg["kind"])
    names = [kind.name]
    for stage in kind.stages(judge_cfg.get("settings") or {}):
        names += judge_kind_names(stage)
    return list(dict.fromkeys(names))


def make_judge(
    judge_cfg: Mapping[str, Any] | None, task: str, cache_dir: Path | None = None
) -> Any:
    """Build the configured judge of ``task``; fail loudly if it cannot run (never fall back).

    ``judge_cfg`` is ``{kind, settings, name}`` (a task's own default is its
    ``Task.default_judge``).
    """
    if judge_cfg is None:
        raise ConfigError(
            f"task {task} needs a judge",
            f"configure tasks.{task}.judge, or pass the task's default_judge",
        )
    kind = judge_kind(judge_cfg["kind"])
    name = judge_cfg.get("name") or kind.name
    if task not in kind.tasks:
        raise ConfigError(
            f"judges.{name} (kind {kind.name}) judges {', '.join(kind.tasks)}, not {task}",
            f"name a judge of another kind under tasks.{task}.judge",
        )
    return kind.build(name, judge_cfg.get("settings") or {}, task, cache_dir)
