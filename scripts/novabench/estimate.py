"""What a run will cost before it runs: requests, tokens, dollars and time per job.

For every (task, model) job of a service-backed model (an adapter whose ``cost_model`` is
``service``, novabench.models.base) the
estimate builds the job's requests exactly as the prediction job will (the same samples,
prompts and cache keys: ``Adapter.requests_for`` and ``Adapter.cached``), so the number of
requests still to send is exact once the dataset is built; answers in the response cache
are not counted. Before the dataset is built it takes the source's known size (NOVA: 906
images) and says so.

Judges: every reading job whose judge asks an LLM (``kind: llm``, or a cascade's LLM stage)
is counted too, per judge: requests, tokens and dollars at the judge backend's price.
Before a model's predictions exist, a full LLM judge counts every image, and a cascade
counts every image as if its first judge decided none (an upper bound, and said so). Once
they exist the counts are exact: the judge's prompts are built from the answers as scoring
builds them (``Task.judged_pairs``), a cascade's offline first judge is run on them and
only what it leaves undecided is counted, and answers already in the judge's cache are
not. Judge answers are sized by earlier score jobs of the same judge where they sent
requests, else by the judge's own default (``ServiceRequests.answer_tokens``, declared by
its class: the estimate asks a judge kind through ``JudgeKind.asks_a_service`` and
``JudgeKind.service_requests``, never its internals).

Tokens: measured usage of earlier answers of the same job (the cached ones) when there are
some, else text at ~4 characters per token plus the image rule of the model's family
(novabench.tokens) and a per-task default answer length. Dollars: the model's price
(``settings.price_per_million_*``, else ``info.price_usd_per_million_tokens``). Time:
``ceil(requests / concurrency) x latency`` per job, with the latency of ``info.latency_s``
or an assumed default. Local models (cost model ``local_gpu``) get requests and GPU time only. A
model that runs in a server of its own (``Adapter.starts_server``) is estimated as a
service, plus the server's start (``info.startup_s``) once per model and run (its first job
with requests to send: one server serves all its tasks, novabench.serving), its request
time divided among ``serve.replicas``, and GPU time: the jobs' wall time on the GPUs the
server asks for.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from novabench.catalog import FAMILIES
from novabench.config import Plan
from novabench.dataset.tags import dataset_tags, subset_spec
from novabench.errors import NovaError
from novabench.judges import judge_kind
from novabench.judges.base import ServiceRequests
from novabench.models.base import COST_LOCAL_GPU, COST_SERVICE, adapter_class
from novabench.tasks import get_task
from novabench.tokens import dollars, image_tokens, text_tokens

NOVA_IMAGES, NOVA_CASES = 906, 281  # the published release (Bercea et al. 2025)
DEFAULT_LATENCY_S = 5.0  # seconds per API request, when the model's info gives none
DEFAULT_GPU_S_PER_IMAGE = 2.0  # local model, when the model's info gives none
DEFAULT_IMAGE_TOKENS = 1000  # a model of unknown family
# Characters of a text placeholder ({clinical_history}, {findings}) before the dataset is
# built: NOVA's histories and captions are a few sentences.
PLACEHOLDER_CHARS = 300
DEFAULT_STARTUP_S = 600.0
# The "model" of the judge estimate's row of an LLM judge's live check (its own sample).
LIVE_CHECK = "(live check)"  # a managed vLLM server loading a large model, when info gives none


@dataclass
class JobEstimate:
    """The estimate of one prediction job."""

    task: str
    model: str
    local: bool
    requests: int  # every request (image) of the job
    to_send: int  # requests without an answer yet
    input_tokens: int | None = None  # of the requests to send
    output_tokens: int | None = None
    usd: float | None = None
    wall_s: float = 0.0
    gpu_s: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class JudgeEstimate:
    """The requests one LLM judge (``stage``) gets from one reading job: the task's judge
    (``judge``, e.g. a cascade) judging one model's answers."""

    judge: str
    task: str
    stage: str
    model: str
    requests: int  # distinct requests of the job
    to_send: int  # those without a cached answer
    input_tokens: int
    output_tokens: int
    usd: float | None
    #: "exact" (counted on the predictions), "every image" (no predictions yet) or
    #: "upper bound" (a cascade's second judge before predictions: every image).
    counted: str
    notes: list[str] = field(default_factory=list)


@dataclass
class Estimate:
    """The estimate of a whole run."""

    dataset: str  # what was counted, in words
    exact: bool  # the dataset is built: request counts are exact
    jobs: list[JobEstimate]
    offline_jobs: int  # jobs of models that cost nothing (controls, baselines, files)
    judges: list[JudgeEstimate] = field(default_factory=list)


# -- the dataset --------------------------------------------------------------------------


def expected_size(dataset_cfg: Mapping[str, Any]) -> tuple[int, str]:
    """Images the configured dataset will have, before it is built, and why."""
    if dataset_cfg["source"] == "sample":
        sample = dataset_cfg["sample"]
        low, high = sample["images_per_case"]
        # The sample draws NOVA's mean images per case where its range allows it, else
        # uniformly (novabench.sample.generate): this is that draw's expectation.
        mean = max(low, min((low + high) / 2, NOVA_IMAGES / NOVA_CASES))
        size, why = round(sample["n_cases"] * mean), "the sample's expected size"
    else:
        size, why = NOVA_IMAGES, "NOVA's published size"
    subset = subset_spec(dataset_cfg) or {}
    if "filenames" in subset:
        size, why = len(subset["filenames"]), "the subset's file names"
    elif "cases" in subset:
        size = round(len(subset["cases"]) * NOVA_IMAGES / NOVA_CASES)
        why = "the subset's cases at NOVA's mean images per case"
    if "limit" in subset:
        size, why = min(size, int(subset["limit"])), "the subset's limit"
    if "categories" in subset:
        why += " (an upper bound: the categories are not counted)"
    return size, why


def load_dataset(plan: Plan, workdir: Path) -> tuple[Any, int, str]:
    """The built dataset of this run (None if not built), its size and its description."""
    from novabench.dataset.read import load_nova

    _, tag = dataset_tags(plan.config["dataset"])
    path = Path(workdir) / "results" / tag / "dataset" / "nova.parquet"
    if path.is_file():
        frame = load_nova(path)
        return frame, len(frame), f"results/{tag}: {len(frame)} images (built: counts are exact)"
    size, why = expected_size(plan.config["dataset"])
    return None, size, f"results/{tag}: not built yet, {size} images assumed ({why})"


# -- one API job ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """What the estimate needs of one request."""

    text: str  # the prompt and the system prompt
    image_size: tuple[int, int] | None  # (width, height) of the image sent, if any
    answer: Any = None  # the cached Response, if the request has one


def _placeholder_prompt(template: str) -> str:
    """The prompt before the dataset exists: 480x480 images, placeholders of typical length."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    values: dict[str, Any] = {name: "x" * PLACEHOLDER_CHARS for name in names}
    return template.format(**{**values, "width": 480, "height": 480})


def _requests(
    plan: Plan, job: tuple[str, str], adapter: Any, frame: Any, size: int, results: Path
) -> tuple[list[_Request], list[str]]:
    """The job's requests (with their cached answers where the dataset is built) and notes."""
    from novabench.predict import build_samples, load_prompt, upstream_answers

    task, name = job
    spec, prompt = get_task(task), plan.prompt(task, name)
    template, _, _ = load_prompt(Path(prompt))
    system = adapter.config["system_prompt"] or ""
    if frame is None:
        image = (480, 480) if spec.uses_image else None
        return [_Request(_placeholder_prompt(template) + system, image)] * size, []
    upstream, notes, lookup = None, [], True
    if plan.upstream(task):
        up_task, up_model = plan.upstream(task)
        path = results / "predictions" / up_task / f"{up_model}.jsonl"
        if path.is_file():
            upstream = upstream_answers(spec, path, frame)
        else:
            lookup = False  # the prompts will hold captions not written yet
            notes.append(
                f"the {up_task} of {up_model} is not predicted yet: prompts sized "
                "with the reference captions, none counted as cached"
            )
    samples = build_samples(frame, spec, template, prompt, upstream)
    requests = adapter.requests_for(samples)
    return [
        _Request(
            r.prompt + system,
            (s.width, s.height) if r.image_png is not None else None,
            adapter.cached(r) if lookup else None,
        )
        for s, r in zip(samples, requests, strict=True)
    ], notes


def _measured(answers: Sequence[Any], summary: Path) -> tuple[float | None, float | None, str]:
    """Mean prompt and answer tokens of earlier answers: the cached ones, else the job's
    last summary; None where nothing was measured."""
    usages = [a.usage for a in answers if a is not None and a.usage]
    where = f"{len(usages)} cached answers"
    if not usages and summary.is_file():
        content = json.loads(summary.read_text(encoding="utf-8"))
        answered = content["n_images"] - content["status_counts"].get("error", 0)
        usages = [content["usage"]] if content.get("usage") and answered else []
        usages = [{k: v / answered for k, v in u.items()} for u in usages]
        where = f"the last run's {answered} answers"
    if not usages:
        return None, None, ""

    def mean(key: str) -> float | None:
        values = [u[key] for u in usages if key in u]
        return sum(values) / len(values) if values else None

    return mean("prompt_tokens"), mean("completion_tokens"), where


def _image_rule(info: Mapping[str, Any], notes: list[str]) -> str | int:
    if info.get("image_tokens") is not None:
        return info["image_tokens"]
    family = FAMILIES.get(info.get("family", ""))
    if family is not None:
        return family.image_tokens
    notes.append(f"image tokens assumed {DEFAULT_IMAGE_TOKENS} (set info.family)")
    return DEFAULT_IMAGE_TOKENS


def model_price(model: Mapping[str, Any]) -> tuple[tuple[float, float] | None, str | None]:
    """(input, output) USD per million tokens and, when there is none, why."""
    settings, info = model.get("settings") or {}, model.get("info") or {}
    price_in = settings.get("price_per_million_input")
    price_out = settings.get("price_per_million_output")
    if price_in is not None and price_out is not None:
        return (price_in, price_out), None
    price = info.get("price_usd_per_million_tokens")
    if price:
        return (price["input"], price["output"]), None
    return None, info.get("price_note") or "no price in the config"


def _tokens(
    job: JobEstimate, requests: Sequence[_Request], info: Mapping[str, Any], summary: Path
) -> None:
    """Input and output tokens of the requests still to send (measured where possible)."""
    to_send = [r for r in requests if r.answer is None]
    prompt_mean, answer_mean, where = _measured([r.answer for r in requests], summary)
    if prompt_mean is not None:
        job.input_tokens = round(prompt_mean * len(to_send))
    else:
        rule = _image_rule(info, job.notes)
        job.input_tokens = sum(
            text_tokens(r.text) + (image_tokens(rule, *r.image_size) if r.image_size else 0)
            for r in to_send
        )
    if answer_mean is None:
        answer_mean = get_task(job.task).answer_tokens + info.get("thinking_tokens", 0)
    job.output_tokens = round(answer_mean * len(to_send))
    if where:
        job.notes.append(f"tokens per request measured on {where}")


def _api_job(
    plan: Plan,
    job: tuple[str, str],
    dataset: tuple[Any, int],
    workdir: Path,
    loaded: set[str] | None = None,
) -> JobEstimate:
    from novabench.models.base import load_adapter

    task, name = job
    model, (frame, size) = plan.model(name), dataset
    loaded = set() if loaded is None else loaded  # models whose server start is counted
    results = Path(workdir) / "results" / dataset_tags(plan.config["dataset"])[1]
    adapter = load_adapter(name, model, cache_dir=Path(workdir) / "results" / "cache")
    requests, notes = _requests(plan, job, adapter, frame, size, results)
    to_send = sum(r.answer is None for r in requests)
    estimate = JobEstimate(task, name, False, len(requests), to_send, notes=notes)
    info = model.get("info") or {}
    summary = results / "predictions" / task / f"{name}.summary.json"
    _tokens(estimate, requests, info, summary)
    price, why = model_price(model)
    if price is None:
        estimate.notes.append(f"no dollars: {why}")
    else:
        estimate.usd = dollars(estimate.input_tokens, estimate.output_tokens, *price)
    latency = info.get("latency_s")
    if latency is None:
        latency = DEFAULT_LATENCY_S
        estimate.notes.append(f"latency assumed {latency:g} s per request (set info.latency_s)")
    estimate.wall_s = math.ceil(to_send / adapter.config["concurrency"]) * latency
    if type(adapter).starts_server:
        estimate.wall_s /= _replicas(model)
        first = name not in loaded
        if first and to_send:
            loaded.add(name)
            tasks = sum(m == name for _, m in plan.jobs())
            estimate.notes.append(f"1 server load for its {tasks} tasks")
        _managed_server(estimate, _job_gpus(name, model), info, load=first and bool(to_send))
    return estimate


def _replicas(model: Mapping[str, Any]) -> int:
    """Copies of the model behind its server (``serve.replicas``): they share the work."""
    serve = (model.get("settings") or {}).get("serve") or {}
    return max(1, int(serve.get("replicas") or 1))


def _job_gpus(name: str, model: Mapping[str, Any]) -> int:
    """The GPUs a prediction job of the model holds (at least one)."""
    settings = dict(model.get("settings") or {})
    return max(1, int(adapter_class(name, dict(model)).job_resources(settings)["gpu"]))


def _cost(name: str, model: Mapping[str, Any]) -> str:
    """How the model's adapter says its jobs are counted (novabench.models.base)."""
    return adapter_class(name, dict(model)).cost_model


def _managed_server(
    estimate: JobEstimate, gpus: int, info: Mapping[str, Any], *, load: bool = True
) -> None:
    """A model's server: its start (``load``: once per model and run, with its first job
    that sends), and the GPUs it holds meanwhile."""
    if load and estimate.to_send:
        startup = info.get("startup_s")
        if startup is None:
            startup = DEFAULT_STARTUP_S
            estimate.notes.append(f"server start assumed {duration(startup)} (set info.startup_s)")
        estimate.wall_s += startup
    estimate.gpu_s = estimate.wall_s * gpus


def _local_job(plan: Plan, job: tuple[str, str], size: int, workdir: Path) -> JobEstimate:
    task, name = job
    model, info = plan.model(name), plan.model(name).get("info") or {}
    tag = dataset_tags(plan.config["dataset"])[1]
    done = (Path(workdir) / "results" / tag / "predictions" / task / f"{name}.jsonl").is_file()
    estimate = JobEstimate(task, name, True, size, 0 if done else size)
    if done:
        estimate.notes.append("predicted already (Snakemake re-runs it if its inputs changed)")
    per_image = info.get("gpu_s_per_image")
    if per_image is None:
        per_image = DEFAULT_GPU_S_PER_IMAGE
        estimate.notes.append(f"{per_image:g} s per image assumed (set info.gpu_s_per_image)")
    estimate.wall_s = estimate.to_send * per_image
    estimate.gpu_s = estimate.wall_s * _job_gpus(name, model)
    return estimate


# -- the judges -----------------------------------------------------------------------------


def _asks_a_service(judge_cfg: Mapping[str, Any] | None) -> bool:
    """Whether a written-out judge sends requests that cost (its kind says)."""
    if judge_cfg is None:
        return False
    return judge_kind(judge_cfg["kind"]).asks_a_service(judge_cfg.get("settings") or {})


def _judged_pairs(plan: Plan, task: str, model: str, frame: Any, results: Path) -> list | None:
    """What scoring will give the task's judge for the model's answers; None before the
    dataset is built or the model predicted."""
    from novabench.answers import read_file

    path = results / "predictions" / task / f"{model}.jsonl"
    if frame is None or not path.is_file():
        return None
    spec = get_task(task)
    scored, _ = spec.scored_rows(frame)
    # Read as the reading stage reads them (statuses, refusals, the task's parser).
    return spec.judged_pairs(scored, read_file(task, path, scored))


def _judge_answer_tokens(results: Path, task: str, judge: str, default: int) -> tuple[float, str]:
    """Tokens per judge answer: measured on the earlier reading jobs of ``judge`` on this
    task that sent requests (the ``usage`` of its verdict summaries,
    ``verdicts/{task}/{judge}/*.summary.json``: the task's own judge and a judge agreement
    judge alike), else the judge's own default."""
    sent = tokens = 0
    for path in sorted((results / "verdicts" / task / judge).glob("*.summary.json")):
        try:
            usage = json.loads(path.read_text(encoding="utf-8")).get("usage") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(usage, dict) and usage.get("sent"):
            sent += usage["sent"]
            tokens += usage.get("completion_tokens", 0)
    if sent and tokens:
        return tokens / sent, f"judge answers measured on {sent} earlier requests"
    return default, ""


def _judge_job(
    names: tuple[str, str, str, str],
    stage: ServiceRequests,
    pairs: list | None,
    size: int,
    answer_tokens: float,
    seen: set[str],
) -> JudgeEstimate:
    """One LLM judge's requests on one model's answers (``pairs``; None: not predicted);
    ``seen``: the prompts it was counted for already (updated)."""
    judge, task, stage_name, model = names
    system, select = stage.system_prompt, stage.select
    if pairs is None:
        requests = to_send = size * stage.requests_per_image
        tokens_in = to_send * text_tokens(_placeholder_prompt(stage.template) + system)
        counted = "every image" if select is None else "upper bound"
    else:
        asked = pairs if select is None else [pairs[i] for i in select(pairs)]
        prompts = stage.judge.request_prompts(asked)
        unsent = [p for p in prompts if p not in seen and not stage.judge.cached(p)]
        seen.update(prompts)
        requests, to_send = len(prompts), len(unsent)
        tokens_in = sum(text_tokens(p + system) for p in unsent)
        counted = "exact"
    tokens_out = round(answer_tokens * to_send)
    usd = dollars(tokens_in, tokens_out, *stage.prices)
    return JudgeEstimate(
        judge, task, stage_name, model, requests, to_send, tokens_in, tokens_out, usd, counted
    )


def _judges_to_run(plan: Plan) -> list[tuple[str, dict[str, Any], str]]:
    """(task, written-out judge, what for) of every judge the run asks: each task's judge
    (its reading jobs), then the judges that read its answers for judge agreement (reading
    jobs of their own)."""
    tasks = list(dict.fromkeys(task for task, _ in plan.jobs()))
    judges = [(task, plan.judge(task), "score") for task in tasks if plan.judge(task)]
    agreement = (plan.config.get("reporting") or {}).get("agreement_judges") or {}
    for task in tasks:
        judges += [(task, plan.judge_config(name), "agreement") for name in agreement.get(task, [])]
    return judges


def _judge_jobs(plan: Plan, frame: Any, size: int, workdir: Path) -> list[JudgeEstimate]:
    """The LLM judge requests of every reading job (and judge agreement), per (judge, LLM
    judge asked, model)."""
    from novabench.judges import make_judge

    results = Path(workdir) / "results" / dataset_tags(plan.config["dataset"])[1]
    out = []
    # Per LLM judge, the prompts counted so far: it asks each once (one cache for all jobs).
    counted: dict[str, set[str]] = {}
    # What each model's answers give a task's judge: read once for every judge and stage.
    judged: dict[tuple[str, str], list | None] = {}
    for task, judge_cfg, purpose in _judges_to_run(plan):
        if not _asks_a_service(judge_cfg):
            continue
        # Built as the reading job builds it (its cache too); building sends nothing.
        judge = make_judge(judge_cfg, task, cache_dir=Path(workdir) / "results" / "cache")
        for stage in judge_kind(judge_cfg["kind"]).service_requests(judge_cfg, judge):
            stage_name = stage.name
            answer_tokens, measured = _judge_answer_tokens(
                results, task, judge_cfg["name"], stage.answer_tokens
            )
            for model in [m for t, m in plan.jobs() if t == task]:
                if (task, model) not in judged:
                    judged[task, model] = _judged_pairs(plan, task, model, frame, results)
                pairs = judged[task, model]
                names = (judge_cfg["name"], task, stage_name, model)
                seen = counted.setdefault(stage_name, set())
                job = _judge_job(names, stage, pairs, size, answer_tokens, seen)
                if purpose == "agreement":
                    job.notes.append("judge agreement: this judge reads the answers too")
                if job.counted == "upper bound":
                    job.notes.append(
                        f"before predictions every image is counted as left undecided by "
                        f"{stage.after}: an upper bound (exact once the models have answered)"
                    )
                elif job.counted == "every image":
                    job.notes.append("before predictions every image is counted")
                if measured:
                    job.notes.append(measured)
                if job.usd is None:
                    job.notes.append(f"no dollars: judges.{stage_name} has no price")
                out.append(job)
            check = _live_check_job(judge_cfg["name"], task, stage, answer_tokens, out)
            if check is not None:
                out.append(check)
    return out


def _live_check_job(
    judge: str, task: str, stage: ServiceRequests, answer_tokens: float, jobs: list
) -> JudgeEstimate | None:
    """The live check an LLM judge gets in its reading jobs (its hand-labelled sample,
    asked once and cached for every job), with its share of the judge's requests; None
    for a judge without one. Counted once per (stage, task)."""
    prompts_of = getattr(stage.judge, "live_check_prompts", None)
    done = {(j.stage, j.task) for j in jobs if j.model == LIVE_CHECK}
    prompts = prompts_of() if prompts_of is not None else []
    if not prompts or (stage.name, task) in done:
        return None
    unsent = [p for p in prompts if not stage.judge.cached(p)]
    tokens_in = sum(text_tokens(p + stage.system_prompt) for p in unsent)
    tokens_out = round(answer_tokens * len(unsent))
    usd = dollars(tokens_in, tokens_out, *stage.prices)
    names = (judge, task, stage.name, LIVE_CHECK, len(prompts), len(unsent))
    job = JudgeEstimate(*names, tokens_in, tokens_out, usd, "exact")
    ours = [j for j in jobs if (j.stage, j.task) == (stage.name, task)]
    judged = sum(j.requests for j in ours if j.model != LIVE_CHECK)
    share = 100.0 * len(prompts) / (len(prompts) + judged)
    job.notes.append(
        f"live check: {len(prompts)} hand-labelled pairs, {share:.1f}% of the requests of "
        f"{stage.name} counted here"
    )
    return job


def estimate_run(plan: Plan, workdir: Path) -> Estimate:
    """The estimate of every prediction job the plan has, and of the LLM judge requests
    of its reading jobs, run from ``workdir``."""
    frame, size, described = load_dataset(plan, Path(workdir))
    jobs, offline, loaded = [], 0, set()
    for job in plan.jobs():
        cost = _cost(job[1], plan.model(job[1]))
        if cost == COST_SERVICE:
            jobs.append(_api_job(plan, job, (frame, size), Path(workdir), loaded))
        elif cost == COST_LOCAL_GPU:
            jobs.append(_local_job(plan, job, size, Path(workdir)))
        else:
            offline += 1
    judges = _judge_jobs(plan, frame, size, Path(workdir))
    return Estimate(described, frame is not None, jobs, offline, judges)


def plan_time_estimate(plan: Plan, workdir: Path) -> str | None:
    """The estimate's table when the run has requests to send to a service (a model's or
    an LLM judge's), else None.

    Printed when the workflow is planned (a dry run too), so it costs a little time only
    for runs with service-backed models or judges.
    """
    services = any(_cost(m, plan.model(m)) == COST_SERVICE for _, m in plan.jobs())
    judged = any(_asks_a_service(plan.judge(t)) for t in dict.fromkeys(t for t, _ in plan.jobs()))
    if not (services or judged):
        return None
    try:
        estimate = estimate_run(plan, Path(workdir))
    except NovaError as exc:
        return f"Estimate of the prediction jobs: not available ({exc})"
    if not any(job.to_send for job in [*estimate.jobs, *estimate.judges] if not _local(job)):
        return None
    return format_estimate(estimate)


def _local(job: JobEstimate | JudgeEstimate) -> bool:
    return getattr(job, "local", False)


# -- the table ------------------------------------------------------------------------------

ASSUMPTIONS = (
    "text ~4 characters per token; image tokens by each model family's rule "
    "(config/models/README.md); {answers}time = "
    "ceil(requests to send / concurrency) x latency per job, the jobs one after another "
    "(rate limits and retries not included); dollars at list prices; judge answers of each "
    "judge's own default length unless measured"
)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _usd(jobs: Sequence[JobEstimate | JudgeEstimate]) -> str:
    priced = [j.usd for j in jobs if j.usd is not None]
    if not priced:
        return "-"
    # Some jobs without a price: their cost is not in the sum.
    return ("" if len(priced) == len(jobs) else ">= ") + f"{sum(priced):,.2f}"


def _row(name: str, task: str, jobs: Sequence[JobEstimate]) -> list[str]:
    def total(attribute: str) -> float | None:
        values = [getattr(j, attribute) for j in jobs]
        return None if any(v is None for v in values) else sum(values)

    tokens_in, tokens_out, gpu = total("input_tokens"), total("output_tokens"), total("gpu_s")
    return [
        name,
        task,
        f"{sum(j.requests for j in jobs):,}",
        f"{sum(j.to_send for j in jobs):,}",
        "-" if tokens_in is None else f"{tokens_in:,}",
        "-" if tokens_out is None else f"{tokens_out:,}",
        _usd(jobs),
        duration(sum(j.wall_s for j in jobs)) + ("" if gpu is None else f" (GPU {duration(gpu)})"),
    ]


def _aligned(rows: Sequence[Sequence[str]], names: int = 2) -> list[str]:
    """Names (the first ``names`` columns) left-aligned, numbers right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(width) if column < names else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def format_estimate(estimate: Estimate) -> str:
    """The estimate as a table: one row per job, a total per model, the notes below."""
    header = ["model", "task", "requests", "to send", "input tokens", "output tokens", "USD"]
    rows = [[*header, "time"]]
    by_model: dict[str, list[JobEstimate]] = {}
    for job in estimate.jobs:
        by_model.setdefault(job.model, []).append(job)
    for name, jobs in by_model.items():
        rows += [_row(name, job.task, [job]) for job in jobs]
        if len(jobs) > 1:
            rows.append(_row(name, "(all)", jobs))
    if len(by_model) > 1:
        rows.append(_row("total", "", estimate.jobs))
    lines = [f"Estimate of the prediction jobs: {estimate.dataset}", *_aligned(rows)]
    notes = dict.fromkeys(f"{j.model}: {note}" for j in estimate.jobs for note in j.notes)
    lines += [f"  note: {note}" for note in notes]
    # Each task's own answer length (Task.answer_tokens), for the tasks with jobs here.
    tasks = list(dict.fromkeys(job.task for job in estimate.jobs))
    defaults = "/".join(str(get_task(name).answer_tokens) for name in tasks)
    answers = f"answers {defaults} tokens ({', '.join(tasks)}) unless measured; " if tasks else ""
    lines.append("  assumptions: " + ASSUMPTIONS.format(answers=answers))
    if estimate.offline_jobs:
        lines.append(f"  {estimate.offline_jobs} jobs of offline models cost nothing")
    if estimate.judges:
        lines += format_judges(estimate.judges)
        lines.append(_totals(estimate))
    return "\n".join(lines)


def _judge_row(cells: Sequence[str], jobs: Sequence[JudgeEstimate]) -> list[str]:
    return [
        *cells,
        f"{sum(j.requests for j in jobs):,}",
        f"{sum(j.to_send for j in jobs):,}",
        f"{sum(j.input_tokens for j in jobs):,}",
        f"{sum(j.output_tokens for j in jobs):,}",
        _usd(jobs),
    ]


def format_judges(judges: Sequence[JudgeEstimate]) -> list[str]:
    """The judges' table: a row per (task's judge, task, LLM judge asked), summed over the
    models it judges; a total when there are several rows; the notes below."""
    header = ["judge", "task", "asks", "requests", "to send", "input tokens", "output tokens"]
    rows = [[*header, "USD"]]
    groups: dict[tuple[str, str, str], list[JudgeEstimate]] = {}
    for job in judges:
        groups.setdefault((job.judge, job.task, job.stage), []).append(job)
    rows += [_judge_row(key, jobs) for key, jobs in groups.items()]
    if len(groups) > 1:
        rows.append(_judge_row(["total", "", ""], judges))
    lines = ["Estimate of the judge requests (the reading jobs):"]
    lines += ["  " + line for line in _aligned(rows, names=3)]
    notes: dict[str, list[str]] = {}
    for job in judges:
        for note in job.notes:
            notes.setdefault(f"{job.judge} ({job.task}): {note}", []).append(job.model)
    for note, models in notes.items():
        lines.append(f"  note: {note} [{', '.join(dict.fromkeys(models))}]")
    return lines


def _totals(estimate: Estimate) -> str:
    """Dollars with and without the judges."""
    models, judges = _usd(estimate.jobs), _usd(estimate.judges)
    priced = [j.usd for j in [*estimate.jobs, *estimate.judges] if j.usd is not None]
    complete = len(priced) == len(estimate.jobs) + len(estimate.judges)
    total = ("" if complete else ">= ") + f"{sum(priced):,.2f}"
    return f"USD: {total} with the judges, {models} without them (the judges: {judges})"
