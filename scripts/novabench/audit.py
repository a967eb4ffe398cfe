"""The judge audit: how far the diagnosis judge can be trusted on one model's own answers.

``draw_sheet`` draws a seeded random sample of a model's judged images, stratified by the
judge's verdicts, into a CSV for a person to label; ``audit_estimate`` reads the filled
sheet and gives the judge's error on this model's answers and a prediction-powered
estimate of Top-1/Top-5 (percent of all images) with a 95% interval.

Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-
powered inference", Science 382, 2023): the judge's rate over all N judged images, corrected
by the mean human-minus-judge difference (the "rectifier") on the labelled sample. Here the
sample is stratified, so the rectifier is a stratified mean:

    theta = mean_N(f) + sum_s (N_s / N) * mean_{labelled in s}(h - f)

with f the judge's scored verdict (match 1; no match and undecided 0) and h the person's
label. No library computes stratified PPI for a proportion, so it is written out here.

Images whose prediction is not ``ok`` (parse errors, refusals, errors, missing answers)
have no answer to judge: they count as 0 in Top-1/Top-5, as the scorer counts them, and are
never drawn. The estimate is for all images: the ``ok`` estimate times N_ok / N_images.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from novabench.errors import NovaError
from novabench.spreadsheet import read_csv, write_csv

AUDIT_TASK = "diagnosis"
METRICS = ("Top-1", "Top-5")
JUDGE_COLUMNS = {"Top-1": "judge_top1", "Top-5": "judge_top5"}
HUMAN_COLUMNS = {"Top-1": "human_top1", "Top-5": "human_top5"}
SCORE_COLUMNS = {"Top-1": "top1_correct", "Top-5": "top5_correct"}
# The judge's three-valued verdicts, where the score file has them (empty: no answer).
VERDICT_COLUMNS = {"Top-1": "top1_verdict", "Top-5": "top5_verdict"}
SHEET_COLUMNS = (
    "item",
    "filename",
    "case_id",
    "reference",
    "predictions",
    "judge_top1",
    "judge_top5",
    "human_top1",
    "human_top5",
    "stratum",
    "stratum_size",
    "n_drawn",
    "scores_sha256",
)
MATCH, NO_MATCH, UNDECIDED = "match", "no match", "undecided"
# The value a verdict scores: undecided counts as no match, as in Top-1/Top-5.
SCORED = {MATCH: 1.0, NO_MATCH: 0.0, UNDECIDED: 0.0}
YES = frozenset({"y", "yes", "1", "true"})
NO = frozenset({"n", "no", "0", "false"})
DEFAULT_SIZE = 100
# Each non-empty stratum gets at least this many items (or all of them): enough for a
# within-stratum variance, so a rare verdict (a weak model's few matches) is audited too.
MIN_PER_STRATUM = 10
_REQUIRED = ("filename", "case_id", "reference", "predictions", *SCORE_COLUMNS.values(), "status")


# --- the judged items -------------------------------------------------------------------


def verdict(value: Any) -> str:
    """match / no match / undecided, from a score file's True/False or a verdict's text."""
    text = str(value).strip().casefold()
    if text in ("true", "1", "1.0", MATCH):
        return MATCH
    if text in ("false", "0", "0.0", NO_MATCH, "no_match"):
        return NO_MATCH
    if text == UNDECIDED:
        return UNDECIDED
    raise NovaError(
        f"unknown judge verdict {value!r} in the score file",
        "re-run `score` for this model",
    )


def read_judged(path: Path) -> pd.DataFrame:
    """A per-image diagnosis score file (``<model>.images.csv``; the ``.json`` beside it
    names the same file), sorted by filename."""
    path = Path(path)
    if path.name.endswith(".json"):
        path = path.with_name(path.name.removesuffix(".json") + ".images.csv")
    try:
        frame = read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise NovaError(
            f"cannot read the score file {path} ({exc})",
            "pass --scores results/<tag>/scores/diagnosis/<model>.images.csv",
        ) from None
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise NovaError(
            f"{path} is not a diagnosis score file (no column {', '.join(missing)})",
            "pass --scores results/<tag>/scores/diagnosis/<model>.images.csv",
        )
    if frame.empty:
        raise NovaError(f"{path} holds no images", "score the model's diagnoses first")
    frame = frame.sort_values("filename", kind="stable").reset_index(drop=True)
    for metric, column in SCORE_COLUMNS.items():
        # The three-valued verdict where the scorer wrote one: an undecided image is a
        # stratum of its own, not hidden among the no matches.
        three = frame.get(VERDICT_COLUMNS[metric], pd.Series("", index=frame.index))
        frame[JUDGE_COLUMNS[metric]] = [
            verdict(v or scored) for v, scored in zip(three, frame[column], strict=True)
        ]
    frame["stratum"] = [
        f"top-1 {t1}, top-5 {t5}"
        for t1, t5 in zip(frame["judge_top1"], frame["judge_top5"], strict=True)
    ]
    return frame


def scores_fingerprint(judged: pd.DataFrame) -> str:
    """SHA-256 of what the judge saw and said for every image: a sheet drawn from other
    predictions or verdicts is refused."""
    fields = ["filename", "reference", "predictions", "status", *SCORE_COLUMNS.values()]
    digest = hashlib.sha256()
    for row in judged[fields].itertuples(index=False):
        digest.update(("\x1f".join(str(v) for v in row) + "\x1e").encode("utf-8"))
    return digest.hexdigest()


# --- the draw ---------------------------------------------------------------------------


def allocate(sizes: Mapping[str, int], n: int, minimum: int = MIN_PER_STRATUM) -> dict[str, int]:
    """Items per stratum: at least ``min(minimum, N_s)`` each (the minimum shrinks to
    n // strata when n cannot give every stratum that many), the rest proportional to N_s
    (largest remainder), never more than N_s; all items when ``n`` >= their number.

    Proportional allocation keeps the sample close to self-weighting; Neyman allocation
    would need the within-stratum error rates, which are what the audit measures."""
    sizes = {s: int(k) for s, k in sizes.items() if k > 0}
    if n >= sum(sizes.values()):
        return dict(sizes)
    if n < len(sizes):
        raise NovaError(
            f"a sample of {n} cannot hold an item of each of the {len(sizes)} verdict strata",
            f"draw at least {len(sizes)} items (--size)",
        )
    minimum = min(minimum, n // len(sizes))
    take = {s: min(minimum, k) for s, k in sizes.items()}
    while (left := n - sum(take.values())) > 0:
        open_ = {s: k for s, k in sizes.items() if take[s] < k}
        total = sum(open_.values())
        shares = {s: left * k / total for s, k in open_.items()}
        for s, share in shares.items():
            take[s] += min(math.floor(share), sizes[s] - take[s])
        # The rest one each, largest fraction first (ties by name); a stratum that is
        # full hands its share on in the next round.
        rest = n - sum(take.values())
        for s in sorted(open_, key=lambda s: (-(shares[s] % 1), s)):
            if rest and take[s] < sizes[s]:
                take[s], rest = take[s] + 1, rest - 1
    return take


def draw_indices(strata: Sequence[str], n: int, seed: int, minimum: int = MIN_PER_STRATUM):
    """Positions of the drawn items (stratified, seeded) and the allocation; strata are
    visited in sorted order so that the same items and seed give the same draw."""
    strata = np.asarray(strata)
    names, counts = np.unique(strata, return_counts=True)
    take = allocate(dict(zip(names.tolist(), counts.tolist(), strict=True)), n, minimum)
    rng = np.random.default_rng(seed)
    chosen = [
        rng.choice(np.flatnonzero(strata == name), take[name], replace=False)
        for name in names.tolist()
    ]
    drawn = np.concatenate(chosen) if chosen else np.array([], dtype=int)
    # Shuffled, so that a labeller's fatigue does not follow the strata.
    return drawn[rng.permutation(len(drawn))], take


def draw_sheet(scores: Path, out: Path, size: int = DEFAULT_SIZE, seed: int = 0) -> dict[str, Any]:
    """Write the audit sheet of one model's judged diagnoses; return what was drawn."""
    judged = read_judged(scores)
    ok = judged[judged["status"] == "ok"].reset_index(drop=True)
    if ok.empty:
        raise NovaError(
            f"{scores}: no image has an answer (status ok) to audit",
            "audit a model that answered",
        )
    if size < 1:
        raise NovaError(f"cannot draw {size} items", "pass --size 1 or more")
    drawn, take = draw_indices(ok["stratum"].tolist(), size, seed)
    sizes = ok["stratum"].value_counts()
    sheet = ok.iloc[drawn].copy()
    sheet.insert(0, "item", range(1, len(sheet) + 1))
    sheet["human_top1"] = ""
    sheet["human_top5"] = ""
    sheet["stratum_size"] = sheet["stratum"].map(sizes).astype(int)
    sheet["n_drawn"] = len(sheet)
    sheet["scores_sha256"] = scores_fingerprint(judged)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(sheet.reindex(columns=list(SHEET_COLUMNS)), out, index=False)
    return {
        "n_images": len(judged),
        "n_ok": len(ok),
        "n_drawn": len(sheet),
        "strata": {
            s: {"size": int(sizes[s]), "drawn": take.get(s, 0)} for s in sorted(sizes.index)
        },
    }


# --- the estimator ------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """An estimate of a proportion (0..1) with its standard error and normal interval."""

    value: float
    se: float
    low: float
    high: float


def stratified_ppi(
    judge: np.ndarray,
    strata: np.ndarray,
    sample: np.ndarray,
    human: np.ndarray,
    confidence: float = 0.95,
) -> Interval:
    """The stratified prediction-powered estimate of the human rate over all items.

    ``judge``, ``strata``: per item of the population (the judge's scored verdict, 0/1,
    the same for every item of a stratum: strata are verdicts); ``sample``: positions of
    the labelled items; ``human``: their labels (0/1).

    The target is the human rate on these N items, the quantity the judge's rate stands in
    for. mean_N(f) is computed over all of them, not sampled, so it adds no variance; the
    only randomness is the draw, without replacement within each stratum, hence
    Var = sum_s (N_s/N)^2 (1 - n_s/N_s) S_s^2 / n_s. Within a verdict stratum the rectifier
    h - f is h shifted by a constant, so S_s^2 = p_s (1 - p_s) with p_s the stratum's human
    rate, taken as (k_s + 1) / (n_s + 2): a judge that rarely errs leaves strata whose
    labels all agree with it, where the plain sample variance is 0 and the interval
    undercovers (82% of 1,000 audits of 100 items with 2% false and 1% missed matches in
    tests/test_audit.py; 100% with this variance, which errs on the wide side). The point
    estimate is the plain PPI one, unbiased.
    """
    judge, strata = np.asarray(judge, dtype=float), np.asarray(strata)
    sample, human = np.asarray(sample, dtype=int), np.asarray(human, dtype=float)
    n_total = len(judge)
    value, variance = float(judge.mean()), 0.0
    for name in np.unique(strata):
        members = strata == name
        if np.ptp(judge[members]) > 0:
            raise ValueError(f"the judge's verdict varies within the stratum {name!r}")
        in_stratum = strata[sample] == name
        size, n = int(members.sum()), int(in_stratum.sum())
        if n == 0:
            raise NovaError(
                f"no labelled item in the verdict stratum {name!r}",
                "label the items the draw gave (every stratum has some)",
            )
        rectifier = human[in_stratum] - judge[sample[in_stratum]]
        weight = size / n_total
        value += weight * float(rectifier.mean())
        smoothed = (float(human[in_stratum].sum()) + 1) / (n + 2)
        variance += weight**2 * (1 - n / size) * smoothed * (1 - smoothed) / n
    se = math.sqrt(variance)
    half = float(norm.ppf(0.5 + confidence / 2)) * se
    return Interval(value, se, max(0.0, value - half), min(1.0, value + half))


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a binomial proportion k/n."""
    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# --- the filled sheet -------------------------------------------------------------------


def _label(text: str) -> float | None:
    """1 / 0 for a yes / no label, None when empty; anything else is refused by the caller."""
    word = text.strip().casefold()
    if not word:
        return None
    if word in YES:
        return 1.0
    if word in NO:
        return 0.0
    return math.nan


SAVE_UTF8 = "save the sheet as UTF-8 CSV"


def _drawn_count(path: Path, text: str) -> int:
    """The sheet's ``n_drawn`` (how many rows the draw wrote) as a number."""
    if not re.fullmatch(r"[0-9]{1,9}", text.strip()):
        raise NovaError(
            f"{path}: n_drawn is {text[:40]!r}, not the number of rows drawn",
            "restore the n_drawn column as `novabench audit draw` wrote it",
        )
    return int(text)


def read_sheet(path: Path) -> pd.DataFrame:
    """The filled sheet with ``human_top1``/``human_top5`` as 0/1; every drawn row must be
    labelled: the estimate weighs the drawn rows as a random sample of their stratum, which
    the rows a person skipped (often the hard ones) would no longer be."""
    path = Path(path)
    fix = "draw a sheet with `novabench audit draw` and fill in human_top1 and human_top5"
    try:
        sheet = read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise NovaError(f"cannot read the audit sheet {path} ({exc})", fix) from None
    except UnicodeDecodeError as exc:
        where = f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        raise NovaError(f"the audit sheet {path} is not UTF-8 ({where})", SAVE_UTF8) from None
    missing = [c for c in SHEET_COLUMNS if c not in sheet.columns]
    if missing:
        raise NovaError(f"{path} is not an audit sheet (no column {', '.join(missing)})", fix)
    if sheet.empty:
        raise NovaError(f"the audit sheet {path} has no rows", fix)
    if sheet["scores_sha256"].nunique() > 1 or sheet["n_drawn"].nunique() > 1:
        raise NovaError(f"{path} mixes the rows of different draws", "keep one draw per sheet")
    drawn = _drawn_count(path, sheet["n_drawn"].iloc[0])
    if len(sheet) != drawn or sheet["filename"].duplicated().any():
        raise NovaError(
            f"{path} has {len(sheet)} rows with {sheet['filename'].nunique()} distinct images, "
            f"but {drawn} were drawn",
            "restore the sheet's rows as drawn (each drawn image once)",
        )
    labels = {column: [_label(v) for v in sheet[column]] for column in HUMAN_COLUMNS.values()}
    for column, values in labels.items():
        bad = next((i for i, v in enumerate(values) if v is not None and math.isnan(v)), None)
        if bad is not None:
            raise NovaError(
                f"{path}: item {sheet['item'].iloc[bad]}: {column} is "
                f"{sheet[column].iloc[bad]!r}, not yes or no",
                "write yes or no (y/n, 1/0 and true/false are read too)",
            )
    empty = [i for i in range(len(sheet)) if any(labels[c][i] is None for c in labels)]
    if empty:
        raise NovaError(
            f"{path}: {len(empty)} of {len(sheet)} drawn rows are unlabelled "
            f"(first: item {sheet['item'].iloc[empty[0]]})",
            "label human_top1 and human_top5 of every row: the estimate needs the whole "
            "random sample, not the rows that were easy to label",
        )
    for column, values in labels.items():
        sheet[column] = values
    contradicts = sheet.index[(sheet["human_top1"] == 1) & (sheet["human_top5"] == 0)]
    if len(contradicts):
        raise NovaError(
            f"{path}: item {sheet.loc[contradicts[0], 'item']}: human_top1 is yes but "
            "human_top5 is no (the top-1 diagnosis is one of the five)",
            "correct the labels of that row",
        )
    return sheet


# --- the audit ------------------------------------------------------------------------------


def _errors(judge: np.ndarray, human: np.ndarray) -> dict[str, dict[str, int]]:
    said_match, said_no = judge == 1, judge == 0
    return {
        "agreement": {"k": int((judge == human).sum()), "n": len(human)},
        # Of the items the judge matched, those the person did not, and conversely.
        "false_match": {"k": int((said_match & (human == 0)).sum()), "n": int(said_match.sum())},
        "missed": {"k": int((said_no & (human == 1)).sum()), "n": int(said_no.sum())},
    }


def audit_estimate(scores: Path, sheet_path: Path, confidence: float = 0.95) -> dict[str, Any]:
    """The judge's error on the labelled items and the prediction-powered Top-1/Top-5 (percent
    of all images) with their interval; JSON-safe."""
    judged = read_judged(scores)
    sheet = read_sheet(sheet_path)
    if sheet["scores_sha256"].iloc[0] != scores_fingerprint(judged):
        raise NovaError(
            f"{sheet_path} was drawn from other judged predictions than {scores} (the "
            "predictions or the judge's verdicts changed since the draw)",
            f"draw a new sheet with `novabench audit draw --scores {scores}` and label it",
        )
    ok = judged[judged["status"] == "ok"].reset_index(drop=True)
    position = pd.Series(range(len(ok)), index=ok["filename"])
    unknown = sheet.loc[~sheet["filename"].isin(position.index), "item"]
    if len(unknown):
        raise NovaError(
            f"{sheet_path}: item {unknown.iloc[0]}: its filename is not an answered image "
            f"of {scores}",
            "restore the filename as drawn",
        )
    sample = position.loc[sheet["filename"]].to_numpy()
    answered = len(ok) / len(judged)
    result: dict[str, Any] = {
        "n_images": len(judged),
        "n_ok": len(ok),
        "n_labelled": len(sheet),
        "confidence": confidence,
        "strata": {
            name: {"size": int((ok["stratum"] == name).sum()), "labelled": int(k)}
            for name, k in ok["stratum"].iloc[sample].value_counts().sort_index().items()
        },
        "metrics": {},
    }
    for metric in METRICS:
        judge = ok[JUDGE_COLUMNS[metric]].map(SCORED).to_numpy(dtype=float)
        human = sheet[HUMAN_COLUMNS[metric]].to_numpy(dtype=float)
        ppi = stratified_ppi(judge, ok["stratum"].to_numpy(), sample, human, confidence)
        low, high = wilson(int(human.sum()), len(human), confidence)
        result["metrics"][metric] = {
            "judged": 100 * answered * float(judge.mean()),
            "audited": 100 * answered * ppi.value,
            "ci_low": 100 * answered * ppi.low,
            "ci_high": 100 * answered * ppi.high,
            "se": 100 * answered * ppi.se,
            # The labelled items alone, unweighted: what a person's labels say without the
            # judge (biased where the allocation is not proportional), for comparison.
            "labelled_only": 100 * answered * float(human.mean()),
            "labelled_only_ci_low": 100 * answered * low,
            "labelled_only_ci_high": 100 * answered * high,
            "undecided": int((ok[JUDGE_COLUMNS[metric]].iloc[sample] == UNDECIDED).sum()),
            **_errors(judge[sample], human),
        }
    return result


def format_audit(result: Mapping[str, Any], model: str) -> str:
    """The audit as a few aligned lines."""
    share = round(100 * result["confidence"])
    n_failed = result["n_images"] - result["n_ok"]
    lines = [
        f"Judge audit of {model}: {result['n_labelled']} labelled of {result['n_ok']} answered "
        f"images ({result['n_images']} in all; {n_failed} without an answer count as wrong "
        "and are not drawn)",
        f"{'metric':<6}  {'judged':>6}  {f'audited [{share}% CI]':<22}  "
        f"{f'labelled only [{share}% CI]':<26}  {'agreement':>9}  {'false matches':>13}  "
        f"{'missed matches':>14}",
    ]
    for metric, m in result["metrics"].items():
        audited = f"{m['audited']:.1f} [{m['ci_low']:.1f}, {m['ci_high']:.1f}]"
        alone = (
            f"{m['labelled_only']:.1f} [{m['labelled_only_ci_low']:.1f}, "
            f"{m['labelled_only_ci_high']:.1f}]"
        )
        counts = [f"{m[k]['k']}/{m[k]['n']}" for k in ("agreement", "false_match", "missed")]
        lines.append(
            f"{metric:<6}  {m['judged']:>6.1f}  {audited:<22}  {alone:<26}  {counts[0]:>9}  "
            f"{counts[1]:>13}  {counts[2]:>14}"
        )
    undecided = {k: m["undecided"] for k, m in result["metrics"].items() if m["undecided"]}
    if undecided:
        text = ", ".join(f"{k} {v}" for k, v in undecided.items())
        lines.append(f"undecided verdicts among the labelled items ({text}) score as no match")
    lines.append(
        "audited: the judge's rate over all answered images, corrected by the mean "
        "person-minus-judge difference per verdict stratum (prediction-powered inference); "
        "false matches: of the judge's matches; missed: of its non-matches"
    )
    return "\n".join(lines)
