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

Answers are read only as the asked JSON object, the whole answer or its one fenced block
(:mod:`.answers`), and normalized here as well, so that equal concepts are equal strings:
lower case, spaces for hyphens, sequences and planes mapped onto the benchmark's modality
words (``t1``, ``t2``, ``flair``, ``dwi``, ``axial``...), negated findings as
``neg:<finding>`` like the keyword judge. The mapping is one function of a string, so what
the LLM made equal stays equal.

Requests go through the chat client's ``complete_many`` (:mod:`novabench.models.chat_client`:
concurrent, retried, and cached under ``<cache_dir>/judges/<judge name>/`` like any
prediction), so re-scoring sends no request twice and needs no network once every answer is
cached.
Identical requests within one batch are sent once. The model that answered (the
response's ``model`` and ``system_fingerprint``) is recorded with the judge's identity.

Nothing falls back silently: a missing key, an unreachable endpoint, or more failed or
unreadable answers than ``max_failure_rate`` (default 0 %) stops scoring with one line;
unreadable answers are then removed from the cache, so a re-run asks again. Within the
rate, a caption pair without a verdict is None (scores leave that image out of the judge's
metrics and count it); a diagnosis without one counts as not matched.

The package: :mod:`.settings` (checking and resolving them, reading prompts), :mod:`.base`
(the requests, on the chat client, with failure accounting), one module per judge class
(:mod:`.paired`, :mod:`.keywords`, :mod:`.diagnosis`), :mod:`.answers` (reading answers)
and :mod:`.normalize` (keywords as equal strings).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from novabench import vllm_server
from novabench.errors import ConfigError, NovaError
from novabench.judges.base import JudgeKind, ServiceRequests, register_judge_kind
from novabench.judges.llm import live_check
from novabench.judges.llm.answers import (
    PairedVerdict,
    UnreadableAnswer,
    read_first_match,
    read_keywords,
    read_paired,
)
from novabench.judges.llm.base import LLMJudge
from novabench.judges.llm.diagnosis import LLMDiagnosisJudge
from novabench.judges.llm.keywords import LLMKeywordJudge
from novabench.judges.llm.normalize import (
    clean_keyword,
    modality_keywords,
    plane_keywords,
    sequence_keywords,
)
from novabench.judges.llm.paired import NO_DESCRIPTION, LLMPairedCaptionJudge
from novabench.judges.llm.settings import (
    BACKEND_DEFAULTS,
    DEFAULT_PROTOCOL,
    DIAGNOSIS_PROTOCOL,
    PROMPT_SPECS,
    PROMPTS_DIR,
    PROTOCOLS,
    SETTINGS_SCHEMA,
    TASKS,
    PromptSpec,
    api_resource,
    check_settings,
    endpoint_problem,
    prompt_paths,
    read_prompt,
    task_protocol,
)

__all__ = [
    "BACKEND_DEFAULTS",
    "DEFAULT_PROTOCOL",
    "DIAGNOSIS_PROTOCOL",
    "JUDGES",
    "NO_DESCRIPTION",
    "PROMPTS_DIR",
    "PROMPT_SPECS",
    "PROTOCOLS",
    "SETTINGS_SCHEMA",
    "TASKS",
    "LLMDiagnosisJudge",
    "LLMJudge",
    "LLMKeywordJudge",
    "LLMKind",
    "LLMPairedCaptionJudge",
    "PairedVerdict",
    "PromptSpec",
    "UnreadableAnswer",
    "api_resource",
    "check_settings",
    "clean_keyword",
    "make_llm_judge",
    "modality_keywords",
    "plane_keywords",
    "prompt_paths",
    "read_first_match",
    "read_keywords",
    "read_paired",
    "read_prompt",
    "sequence_keywords",
    "task_protocol",
]


# --- construction ---------------------------------------------------------------------------


#: (task, protocol) -> the judge class; a diagnosis judge has one protocol.
JUDGES: dict[tuple[str, str], type[LLMJudge]] = {
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
) -> LLMJudge:
    """The ``llm`` judge of config ``judges.<name>`` for ``task`` (captioning or diagnosis),
    asking the way ``settings.protocol`` says (captioning: paired by default)."""
    if task not in TASKS:
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
    tasks = TASKS
    settings_schema = SETTINGS_SCHEMA
    remote = True

    def check_settings(self, name, settings, resolve) -> None:
        resolved = check_settings(name, dict(settings), resolve)
        for task, path in resolved["prompts"].items():
            read_prompt(name, task, path, resolved["protocol"])

    def build(self, name, settings, task, cache_dir=None) -> LLMJudge:
        return make_llm_judge(name, dict(settings), task, cache_dir)

    def input_files(self, name, settings, task, resolve) -> list[str]:
        # The prompt, and the validation sets the live check draws its pairs from.
        check = live_check.resolve(dict(settings).get("live_check"))
        sets = live_check.set_files(task) if check[live_check.SAMPLE_SETTING[task]] else []
        return [prompt_paths(name, dict(settings), resolve)[task], *sets]

    def environment_problems(self, name, settings, tasks, resolve) -> list[NovaError]:
        resolved = check_settings(name, dict(settings), resolve)
        if resolved["serve"] is not None:
            return []  # the reading job starts its server: nothing to reach before
        problem = endpoint_problem(name, resolved["backend"])
        return [] if problem is None else [problem]

    def api_resource(self, settings) -> str | None:
        if settings.get("serve") is not None:
            return None  # its own server in each reading job: no cap across jobs
        return api_resource(dict(settings))

    def job_resources(self, settings) -> dict[str, int]:
        """A served judge's reading job holds its server's GPUs, CPUs and memory."""
        serve = settings.get("serve")
        if serve is None:
            return super().job_resources(settings)
        resolved = vllm_server.resolve_serve("judge", serve)
        return {
            "gpu": vllm_server.job_gpus(resolved),
            "cpus": vllm_server.job_cpus(resolved),
            "mem_mb": vllm_server.job_mem_mb(resolved),
        }

    def service_requests(self, judge_cfg, judge) -> list[ServiceRequests]:
        return [judge.service_requests(judge_cfg["name"])]
