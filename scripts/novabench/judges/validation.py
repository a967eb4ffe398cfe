"""How far each configured judge agrees with hand labels: the judge report.

The hand-labelled sets live in ``validation/`` at the repository root (its README indexes
them; each set's own README gives its format and labelling rules): five independent
diagnosis sets ``diagnoses*.jsonl`` and the caption set ``captions.jsonl``. Each pair
belongs to the ``tune`` half (which may be used to improve a judge) or the ``heldout``
half (reporting only); the report gives both, labelled, and the held-out half is the one
to quote.

- Diagnosis judges: accuracy as scored (an undecided verdict counts as no match),
  false-match rate (false positives / true non-matches) and missed-match rate (false
  negatives / true matches), with counts and Wilson 95% intervals, and every error
  (capped); then the judge's three-valued verdicts: the undecided share, and among the
  pairs it decided its accuracy, false-match and missed rates; and whether the hand-labelled
  share of true matches lies between the share scored as matches (undecided = no match)
  and the upper bound (undecided = match), as a score's bracket claims it does.
- Caption judges: per pair, the judge's Clinical and Modality F1 against the hand-labelled
  F1 (set F1 of the pair's hand keywords, as the benchmark computes it), as a mean
  absolute difference, also apart for the pairs whose two captions the judge read fully
  (unread share 0) and for the rest, and on the pairs it is confident of (keyword doubt,
  :mod:`novabench.caption_keywords`), beside a second rater's difference from the first
  labels where the set has one; precision and recall of the judge's keywords against
  the hand keywords after the same cleaning; normal/abnormal accuracy; the worst pairs.

The sets are listed as data, in ``resources/validation_sets.yaml`` (:data:`REGISTRY`, read
into ``VALIDATION_SETS``): a new set file is one entry there; a set listed before its file
exists is reported as not measured, so dropping the file into ``validation/`` is all it
then takes.

A judge that calls a service (an LLM) is skipped with one line when its key or endpoint
is missing; its answers are cached like a model's when it runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from novabench import paths
from novabench.caption_keywords import (
    CONFIDENT_DOUBT,
    MODALITY_KEYWORDS,
    is_confident,
    pair_doubt,
    set_f1,
    split_keywords,
)
from novabench.errors import NovaError
from novabench.io import atomic_write_text
from novabench.judges import raw_validation
from novabench.judges.base import (
    NEGATED_PREFIX,
    judge_caption_pairs,
    judge_kind,
    judge_ranked,
    make_judge,
)
from novabench.judges.figures import REMEASURE, read_record, verdict_identity
from novabench.judges.llm import clean_keyword
from novabench.judges.validation_stats import (
    SPLITS,
    bracket_line,
    json_lines,
    k_of_n,
    markdown_table,
    percent,
    proportion,
    share,
    three_valued,
)
from novabench.tasks.base import builtin_task_names
from novabench.yaml_data import read_yaml

# The held-out pairs of a fresh set that repeat no pair of a set the judges were tuned on
# (independent authors write some identical pairs; those are not a fresh measurement).
NEW_PAIRS = "heldout-new"
MAX_EXAMPLES = 25
DIAGNOSIS_FIELDS = ("id", "split", "phenomenon", "reference", "prediction", "match")
CAPTION_FIELDS = (
    "id",
    "split",
    "phenomenon",
    "reference",
    "prediction",
    "reference_labels",
    "prediction_labels",
)


@dataclass(frozen=True)
class Measure:
    """How a set's hand labels measure a judge (the registry's ``measure`` of a set): the
    fields of its lines, the judge's agreement with them per half, that agreement as
    Markdown and as the one line the command prints, the figures the judge record keeps
    per quotable held-out half and pooled over several, how a second rater's file of the
    same set is read (``<set>-second-rater.jsonl``), and where the record keeps the
    figures: at the top of a judge's entry (``record_key`` None: the judge's own error) or
    under ``record_key`` (``end_to_end``: reading and judging raw answers together)."""

    fields: tuple[str, ...]
    agreement: Callable[[Any, list[dict[str, Any]]], dict[str, Any]]
    markdown: Callable[[str, dict[str, Any], ValidationSet], list[str]]
    summary: Callable[[Mapping[str, Any]], str]
    set_figures: Callable[[Mapping[str, Any]], dict[str, Any]]
    pooled: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]
    second_rater: Callable[[Path, list[dict[str, Any]]], dict[str, Any]]
    record_key: str | None = None


@dataclass(frozen=True)
class ValidationSet:
    """One hand-labelled set: its key in the report, the task whose judges it measures and
    how (its :class:`Measure`), its file, and the halves that were used to tune the judges
    (their numbers are not independent)."""

    key: str
    task: str
    measure: Measure
    filename: str
    title: str
    tuned_on: tuple[str, ...] = ("tune",)

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields every line of the set holds."""
        return self.measure.fields

    def split_title(self, split: str) -> str:
        if split == NEW_PAIRS:
            return "held-out half, only the pairs that repeat no pair of a tuning set"
        half = "held-out half" if split == "heldout" else "tuning half"
        if split in self.tuned_on:
            return f"{half} (used to tune the judges: not an independent measurement)"
        return half

    def split_label(self, split: str) -> str:
        """A short label of a half that says whether its numbers are tuning numbers."""
        if split in self.tuned_on:
            half = "held-out half" if split == "heldout" else "tuning half"
            return f"tuning numbers: {half}, since tuned on"
        new = ", new pairs only" if split == NEW_PAIRS else ""
        return f"held-out measurement{new}"

    def reported(self, split: str) -> bool:
        """The half to quote: held out and never used for tuning."""
        return split == "heldout" and split not in self.tuned_on


# --- reading the sets ---------------------------------------------------------------------


def validation_folder(folder: Path | None = None) -> Path:
    """The folder of the hand-labelled sets: ``folder``, else the repository's
    ``validation/``. NovaError when it is absent (an installed package does not ship it)."""
    folder = Path(folder) if folder is not None else paths.VALIDATION
    if not folder.is_dir():
        raise NovaError(
            f"no validation sets at {folder} (the hand-labelled sets ship with the "
            "repository, not with the installed package)",
            "run from a checkout of the repository, or pass --validation-dir DIR",
        )
    return folder


def read_pairs(path: Path, fields: Sequence[str]) -> list[dict[str, Any]]:
    """The pairs of a JSON-lines validation set; a malformed line stops with its number."""
    return [pair for _, pair in read_numbered_pairs(path, fields)]


def read_numbered_pairs(path: Path, fields: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, pair) of each pair of a JSON-lines validation set."""
    pairs = []
    for number, pair in json_lines(path):
        missing = [f for f in fields if not isinstance(pair, dict) or f not in pair]
        if missing or pair["split"] not in SPLITS:
            problem = f"lacks {', '.join(missing)}" if missing else f"split {pair['split']!r}"
            raise NovaError(
                f"{path}:{number} {problem}",
                f"give every pair {', '.join(fields)} with split tune or heldout "
                "(validation/README.md)",
            )
        pairs.append((number, pair))
    return pairs


def _file_record(path: Path, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {s: sum(p["split"] == s for p in pairs) for s in SPLITS}
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {"path": str(path), "sha256": sha, "n": len(pairs), **counts}


# --- statistics -----------------------------------------------------------------------------


# --- diagnosis ------------------------------------------------------------------------------


def _verdicts(judge: Any, pairs: list[dict[str, Any]]) -> list[str]:
    """Top-1 verdict of each pair: match, no_match or undecided (a two-valued judge's are
    all decided; :func:`novabench.judges.base.judge_ranked`)."""
    asked = [([p["prediction"]], p["reference"]) for p in pairs]
    return [verdict.top1 for verdict in judge_ranked(judge, asked)]


def _subsets(pairs: list[dict[str, Any]]) -> tuple[str, ...]:
    return (*SPLITS, NEW_PAIRS) if any("seen_in_tuning" in p for p in pairs) else SPLITS


def _in_subset(pair: dict[str, Any], subset: str) -> bool:
    if subset == NEW_PAIRS:
        return pair["split"] == "heldout" and not pair["seen_in_tuning"]
    return pair["split"] == subset


def diagnosis_agreement(judge: Any, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split: accuracy, false-match and missed-match rates, and the errors."""
    verdicts = _verdicts(judge, pairs)
    explain = getattr(judge, "explain", None)
    out: dict[str, Any] = {}
    for split in _subsets(pairs):
        rows = [(p, v) for p, v in zip(pairs, verdicts, strict=True) if _in_subset(p, split)]
        # As scored: an undecided verdict counts as no match.
        false_match = [p for p, v in rows if v == "match" and not p["match"]]
        missed = [p for p, v in rows if v != "match" and p["match"]]
        positives = sum(p["match"] for p, _ in rows)
        errors = [
            {
                "id": p["id"],
                "error": "false match" if p in false_match else "missed",
                "phenomenon": p["phenomenon"],
                "reference": p["reference"],
                "prediction": p["prediction"],
                "why": p.get("why", ""),
                "rule": explain(p["prediction"], p["reference"]).rule if explain else None,
                "verdict": v,
            }
            for p, v in rows
            if p in false_match or p in missed
        ]
        rated = [p for p, _ in rows if "second_match" in p]
        if rated:
            agree = sum(p["second_match"] == p["match"] for p in rated)
            second = {"second_rater": proportion(agree, len(rated))}
        else:
            second = {}
        out[split] = {
            **second,
            "n": len(rows),
            "accuracy": proportion(len(rows) - len(errors), len(rows)),
            "false_match": proportion(len(false_match), len(rows) - positives),
            "missed": proportion(len(missed), positives),
            "errors_total": len(errors),
            "errors": errors[:MAX_EXAMPLES],
            **three_valued(rows),
        }
    return out


# --- captioning -----------------------------------------------------------------------------


def _clean(keywords: Sequence[str]) -> frozenset[str]:
    return frozenset(k for k in (clean_keyword(x) for x in keywords) if k)


@functools.cache
def _stem(word: str) -> str:
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer().stem(word)


def comparable_keyword(keyword: str) -> tuple[str, ...]:
    """A keyword as compared with a hand keyword: a negated finding written as the hand
    labels write it ("neg:enhancement" -> "no enhancement"), lower-case words, each
    Porter-stemmed, so that "hyperintense" and "hyperintensity" are one keyword. A concept
    the judge and the labeller name with different words still counts as a miss."""
    keyword = clean_keyword(keyword)
    if keyword.startswith(NEGATED_PREFIX):
        keyword = "no " + keyword[len(NEGATED_PREFIX) :]
    return tuple(_stem(w) for w in re.findall(r"[a-z0-9]+", keyword))


def _hand(labels: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str], bool]:
    """(clinical, modality, abnormal) of one caption's hand labels, cleaned like a judge's."""
    modality = _clean(labels.get("modality") or [])
    unknown = modality - MODALITY_KEYWORDS
    if unknown:
        raise NovaError(
            f"hand modality keywords {sorted(unknown)} are outside the benchmark's set",
            f"use only {', '.join(sorted(MODALITY_KEYWORDS))}",
        )
    return _clean(labels.get("clinical") or []), modality, bool(labels.get("abnormal"))


def f1_difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else abs(a - b)


def caption_rows(judge: Any, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    verdicts = judge_caption_pairs(judge, [(p["reference"], p["prediction"]) for p in pairs])
    rows = []
    for pair, verdict in zip(pairs, verdicts, strict=True):
        if verdict is None:  # a judge's unreadable answer: no verdict to compare
            continue
        ref_kw, pred_kw = verdict
        hand_ref, hand_pred = _hand(pair["reference_labels"]), _hand(pair["prediction_labels"])
        judge_ref, judge_pred = split_keywords(ref_kw.keywords), split_keywords(pred_kw.keywords)
        f1 = {
            "clinical": (set_f1(hand_ref[0], hand_pred[0]), set_f1(judge_ref[0], judge_pred[0])),
            "modality": (set_f1(hand_ref[1], hand_pred[1]), set_f1(judge_ref[1], judge_pred[1])),
        }
        rows.append(
            {
                "pair": pair,
                "f1": f1,
                # Precision and recall are of the clinical keywords: the modality words
                # come from a closed set both sides name alike.
                "hand_keywords": [hand_ref[0], hand_pred[0]],
                "judge_keywords": [judge_ref[0], judge_pred[0]],
                "labels": [(hand_ref[2], ref_kw.abnormal), (hand_pred[2], pred_kw.abnormal)],
                "unread": (ref_kw.unread_share, pred_kw.unread_share),
                "doubt": pair_doubt(ref_kw, pred_kw),
            }
        )
    return rows


def read_fully(row: Mapping[str, Any]) -> bool | None:
    """Whether the judge read every content word of both captions; None: it does not say."""
    shares = row.get("unread") or (None, None)
    return None if None in shares else all(s == 0 for s in shares)


def _mad(rows: Sequence[Mapping[str, Any]], family: str) -> dict[str, Any]:
    """Mean absolute F1 difference to the hand F1 over the rows where both are defined."""
    diffs = [f1_difference(*r["f1"][family]) for r in rows]
    defined = [d for d in diffs if d is not None]
    return {"mad": math.fsum(defined) / len(defined) if defined else None, "n": len(defined)}


def caption_split(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for family in ("clinical", "modality"):
        diffs = [f1_difference(*r["f1"][family]) for r in rows]
        defined = [d for d in diffs if d is not None]
        out[f"{family}_f1_mad"] = math.fsum(defined) / len(defined) if defined else None
        out[f"{family}_f1_n"] = len(defined)
        # Pairs where one side's F1 is undefined (both keyword sets empty) and the other's not.
        out[f"{family}_f1_undefined_mismatch"] = sum(
            (a is None) != (b is None) for a, b in (r["f1"][family] for r in rows)
        )
        # Dataset means can agree while pairs do not (errors cancel): both are shown.
        for who, at in (("hand", 0), ("judge", 1)):
            values = [r["f1"][family][at] for r in rows if r["f1"][family][at] is not None]
            out[f"{family}_f1_mean_{who}"] = math.fsum(values) / len(values) if values else None
        out[f"{family}_f1_within_5"] = proportion(sum(d <= 5 for d in defined), len(defined))
    # Keyword F1 is as good as the judge's reading: its error where it read every word
    # of both captions, and where it did not (a judge that does not say has neither).
    fully = [read_fully(r) for r in rows]
    out["unread_known"] = sum(f is not None for f in fully)
    out["read_fully"] = sum(f is True for f in fully)
    paired = list(zip(rows, fully, strict=True))
    out["clinical_f1_read_fully"] = _mad([r for r, f in paired if f is True], "clinical")
    out["clinical_f1_not_read_fully"] = _mad([r for r, f in paired if f is False], "clinical")
    out.update(confident_split(rows))
    keys = [_keyword_keys(r) for r in rows]
    hits = sum(len(h & j) for hand, judge in keys for h, j in zip(hand, judge, strict=True))
    n_judge = sum(len(j) for _, judge in keys for j in judge)
    n_hand = sum(len(h) for hand, _ in keys for h in hand)
    out["keyword_precision"] = proportion(hits, n_judge)
    out["keyword_recall"] = proportion(hits, n_hand)
    labels = [pair for r in rows for pair in r["labels"]]
    out["abnormal_accuracy"] = proportion(sum(h == j for h, j in labels), len(labels))
    worst = sorted(rows, key=pair_badness, reverse=True)[:MAX_EXAMPLES]
    out["worst"] = [_worst_entry(r) for r in worst if pair_badness(r) > 0]
    return out


def confident_split(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pairs the judge calls confident (keyword doubt at most CONFIDENT_DOUBT) of those
    it gives a doubt for, and the Clinical F1 difference to the hand F1 on them; the second
    rater's difference from the first where the pairs have one (``second_labels``)."""
    known = [r for r in rows if r.get("doubt") is not None]
    confident = [r for r in known if is_confident(r["doubt"])]
    out: dict[str, Any] = {
        "doubt_known": len(known),
        "confident": proportion(len(confident), len(known)),
        "clinical_f1_confident": _mad(confident, "clinical"),
    }
    rated = [r for r in rows if r["pair"].get("second_labels") is not None]
    if rated:
        out["second_rater_clinical_f1"] = _mad([second_rater_row(r) for r in rated], "clinical")
    return out


def second_rater_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row whose "judge" is a second person: their labels' Clinical F1 beside the first
    rater's, compared as a judge's are."""
    second = row["pair"]["second_labels"]
    ref, pred = _hand(second["reference_labels"]), _hand(second["prediction_labels"])
    return {**row, "f1": {"clinical": (row["f1"]["clinical"][0], set_f1(ref[0], pred[0]))}}


def _keyword_keys(row: dict[str, Any]) -> tuple[list[set], list[set]]:
    """Per caption of the pair, the hand and the judge clinical keywords as compared."""
    return (
        [{comparable_keyword(k) for k in side} for side in row["hand_keywords"]],
        [{comparable_keyword(k) for k in side} for side in row["judge_keywords"]],
    )


def pair_badness(row: dict[str, Any]) -> float:
    """How far a caption pair's judge F1s are from the hand F1s: the larger difference,
    100 where the F1 is defined on one side only."""
    diffs = [f1_difference(*row["f1"][f]) for f in ("clinical", "modality")]
    undefined = sum((a is None) != (b is None) for a, b in row["f1"].values())
    return max([d for d in diffs if d is not None] + [100.0 * bool(undefined)] + [0.0])


def _worst_entry(row: dict[str, Any]) -> dict[str, Any]:
    pair = row["pair"]
    return {
        "id": pair["id"],
        "phenomenon": pair["phenomenon"],
        "reference": pair["reference"],
        "prediction": pair["prediction"],
        "clinical_f1": {"hand": row["f1"]["clinical"][0], "judge": row["f1"]["clinical"][1]},
        "modality_f1": {"hand": row["f1"]["modality"][0], "judge": row["f1"]["modality"][1]},
        "judge_keywords": [sorted(k) for k in row["judge_keywords"]],
        "hand_keywords": [sorted(k) for k in row["hand_keywords"]],
    }


def caption_agreement(judge: Any, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split: F1 differences to the hand labels, keyword precision/recall, labels."""
    rows = caption_rows(judge, pairs)
    return {s: caption_split([r for r in rows if r["pair"]["split"] == s]) for s in SPLITS}


# --- every configured judge -------------------------------------------------------------------


def _skip_reason(name: str, cfg: Mapping[str, Any], task: str, resolve) -> str | None:
    kind = judge_kind(cfg["kind"])
    if task not in kind.tasks:
        return None
    if not kind.remote:
        return ""
    problems = kind.environment_problems(name, cfg.get("settings") or {}, [task], resolve)
    return str(problems[0]).split("; fix:")[0] if problems else ""


def judge_agreement(
    judges: Mapping[str, Mapping[str, Any]],
    pairs: Mapping[str, list[dict[str, Any]]],
    cache_dir: Path | None = None,
    resolve: Callable[[str], str] = str,
) -> dict[str, Any]:
    """Every judge of ``judges`` (config ``judges:``) on every set (``pairs`` keyed by set,
    see VALIDATION_SETS) of a task it judges; results keyed by set."""
    out: dict[str, Any] = {}
    for name, cfg in judges.items():
        entry: dict[str, Any] = {"kind": cfg["kind"], "tasks": {}, "skipped": {}}
        built: dict[str, Any] = {}  # one judge per task, shared by that task's sets
        for key, set_pairs in pairs.items():
            vset = SETS_BY_KEY[key]
            task = vset.task
            reason = _skip_reason(name, cfg, task, resolve)
            if reason is None or not set_pairs:
                continue
            if reason:
                entry["skipped"][key] = reason
                continue
            if task not in built:
                built[task] = make_judge({**cfg, "name": name}, task, cache_dir)
                entry.setdefault("identity", {})[task] = built[task].identity()
            entry["tasks"][key] = vset.measure.agreement(built[task], set_pairs)
        out[name] = entry
    return out


# --- the report files -------------------------------------------------------------------------


def load_sets(folder: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The pairs of each file of VALIDATION_SETS in ``folder``, keyed by set (a missing
    file gives no pairs and is recorded as missing), and a record of each file."""
    pairs: dict[str, list[dict[str, Any]]] = {}
    files: dict[str, Any] = {}
    for vset in VALIDATION_SETS:
        path = Path(folder) / vset.filename
        if not path.is_file():
            pairs[vset.key], files[vset.key] = [], {"path": str(path), "missing": True}
            continue
        pairs[vset.key] = read_pairs(path, vset.fields)
        files[vset.key] = _file_record(path, pairs[vset.key])
        second = path.with_name(f"{path.stem}-second-rater.jsonl")
        if second.is_file():
            files[vset.key]["second_rater"] = vset.measure.second_rater(second, pairs[vset.key])
    _mark_seen_in_tuning(pairs, files)
    return pairs, files


def _attach_second_rater(path: Path, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """A second rater's labels of the same pairs, given blind to the first labels: how
    often two raters agree is the ceiling for any judge. A line is ``{"id", "match"}``
    (``second_match`` of the pair) or, for a caption set, ``{"id", "reference_labels",
    "prediction_labels"}`` (``second_labels``)."""
    labels = {}
    for number, row in json_lines(path):
        label = _second_label(row)
        if label is None:
            raise NovaError(
                f"{path}:{number} lacks an id or a true/false match (or both captions' labels)",
                "fix that line",
            )
        labels[row["id"]] = label
    for pair in pairs:
        if pair["id"] in labels:
            label = labels[pair["id"]]
            pair["second_match" if isinstance(label, bool) else "second_labels"] = label
    rated = sum("second_match" in p or "second_labels" in p for p in pairs)
    return {"path": str(path), "n": rated}


def _second_label(row: Any) -> bool | dict[str, Any] | None:
    """A second-rater line's label: its match, or its two captions' labels; None: neither."""
    if not isinstance(row, dict) or "id" not in row:
        return None
    if isinstance(row.get("match"), bool):
        return row["match"]
    sides = ("reference_labels", "prediction_labels")
    if all(isinstance(row.get(side), dict) for side in sides):
        return {side: row[side] for side in sides}
    return None


def _pair_key(pair: Mapping[str, Any]) -> tuple[str, str]:
    return (
        " ".join(pair["reference"].casefold().split()),
        " ".join(pair["prediction"].casefold().split()),
    )


def _mark_seen_in_tuning(pairs: dict[str, list[dict[str, Any]]], files: dict[str, Any]) -> None:
    """Flag each pair of a set whose held-out half is reported when it repeats a pair
    of another set that tuned the judges (independent authors write some identical
    pairs)."""
    for vset in VALIDATION_SETS:
        if not vset.reported("heldout") or not pairs.get(vset.key):
            continue
        tuned = {
            _pair_key(p)
            for other in VALIDATION_SETS
            if other.task == vset.task and other.key != vset.key and other.measure is vset.measure
            for p in pairs.get(other.key, [])
            if p["split"] in other.tuned_on
        }
        if not tuned:
            continue
        for pair in pairs[vset.key]:
            pair["seen_in_tuning"] = _pair_key(pair) in tuned
        files[vset.key]["seen_in_tuning"] = sum(p["seen_in_tuning"] for p in pairs[vset.key])


def write_report(
    judges: Mapping[str, Mapping[str, Any]],
    folder: Path,
    out_json: Path,
    out_md: Path,
    cache_dir: Path | None = None,
    resolve: Callable[[str], str] = str,
) -> dict[str, Any]:
    """Run every judge over the validation sets in ``folder``; write the JSON and Markdown."""
    pairs, files = load_sets(folder)
    report = {
        "validation_sets": files,
        "judges": judge_agreement(judges, pairs, cache_dir, resolve),
    }
    for path in (out_json, out_md):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", "utf-8")
    Path(out_md).write_text(render_markdown(report), encoding="utf-8")
    return report


# --- Markdown -----------------------------------------------------------------------------------


def diagnosis_markdown(split: str, stats: dict[str, Any], vset: ValidationSet) -> list[str]:
    lines = [f"#### {vset.title}, {vset.split_title(split)} (n = {stats['n']})", ""]
    three = [
        ["undecided share (the judge said neither)", *share(stats["undecided"])],
        ["decided accuracy (of decided pairs)", *share(stats["decided_accuracy"])],
        [
            "false-match rate among decided pairs (of decided true non-matches)",
            *share(stats["decided_false_match"]),
        ],
        [
            "missed-match rate among decided pairs (of decided true matches)",
            *share(stats["decided_missed"]),
        ],
    ]
    lines += markdown_table(
        ["metric", "rate", "count", "Wilson 95% CI"],
        [
            ["accuracy as scored (undecided = no match)", *share(stats["accuracy"])],
            ["false-match rate (of true non-matches)", *share(stats["false_match"])],
            ["missed-match rate (of true matches, undecided included)", *share(stats["missed"])],
            *three,
            *(
                [["a second rater's agreement with the labels", *share(stats["second_rater"])]]
                if "second_rater" in stats
                else []
            ),
        ],
    )
    lines += ["", bracket_line(stats["bracket"])]
    if stats["errors"]:
        shown = len(stats["errors"])
        lines += ["", f"Errors ({shown} of {stats['errors_total']}):", ""]
        lines += markdown_table(
            ["id", "error", "phenomenon", "reference", "prediction", "judge rule"],
            [
                [e["id"], e["error"], e["phenomenon"], e["reference"], e["prediction"], e["rule"]]
                for e in stats["errors"]
            ],
        )
    return [*lines, ""]


def _read_fully_rows(stats: Mapping[str, Any]) -> list[list[str]]:
    """The Clinical F1 difference apart for the pairs read fully and the rest."""
    if not stats.get("unread_known"):
        return [["Clinical F1 by unread share", "n/a", "the judge gives no unread share"]]
    fully, rest = stats["clinical_f1_read_fully"], stats["clinical_f1_not_read_fully"]
    return [
        [
            "Clinical F1, mean absolute difference, pairs read fully (unread share 0)",
            _f1(fully["mad"]),
            f"{fully['n']} pairs with F1 defined, of {stats['read_fully']} read fully",
        ],
        [
            "Clinical F1, mean absolute difference, pairs with unread words",
            _f1(rest["mad"]),
            f"{rest['n']} pairs with F1 defined, of "
            f"{stats['unread_known'] - stats['read_fully']} not read fully",
        ],
    ]


def _confident_rows(stats: Mapping[str, Any]) -> list[list[str]]:
    """The pairs the judge calls confident (keyword doubt), and the second rater's
    difference from the first labels: the human floor beside the judge."""
    rows = []
    if stats.get("doubt_known"):
        rate, count, interval = share(stats["confident"])
        mad = stats["clinical_f1_confident"]
        rows.append(
            [
                f"pairs confident (keyword doubt <= {CONFIDENT_DOUBT:g} F1 points)",
                rate,
                f"{count}, Wilson 95% CI {interval}",
            ]
        )
        rows.append(
            [
                "Clinical F1, mean absolute difference, confident pairs",
                _f1(mad["mad"]),
                f"{mad['n']} pairs with F1 defined",
            ]
        )
    if "second_rater_clinical_f1" in stats:
        second = stats["second_rater_clinical_f1"]
        rows.append(
            [
                "Clinical F1, mean absolute difference, a second rater's labels to the first's",
                _f1(second["mad"]),
                f"{second['n']} pairs with F1 defined",
            ]
        )
    return rows


def _f1(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def caption_markdown(split: str, stats: dict[str, Any], vset: ValidationSet) -> list[str]:
    lines = [f"#### {vset.title}, {vset.split_title(split)} (n = {stats['n']})", ""]
    rows = [
        [
            f"{family.title()} F1, mean absolute difference to hand F1 (points)",
            _f1(stats[f"{family}_f1_mad"]),
            f"{stats[f'{family}_f1_n']} pairs; {stats[f'{family}_f1_undefined_mismatch']} "
            "with F1 undefined on one side only",
        ]
        for family in ("clinical", "modality")
    ]
    rows += _read_fully_rows(stats) + _confident_rows(stats)
    for family in ("clinical", "modality"):
        rate, count, _ = share(stats[f"{family}_f1_within_5"])
        rows.append([f"{family.title()} F1 within 5 points of hand F1", rate, f"{count} pairs"])
        rows.append(
            [
                f"{family.title()} F1, dataset mean (hand / judge)",
                f"{_f1(stats[f'{family}_f1_mean_hand'])} / {_f1(stats[f'{family}_f1_mean_judge'])}",
                "means can agree while pairs differ",
            ]
        )
    for key, title in (
        ("keyword_precision", "clinical keyword precision"),
        ("keyword_recall", "clinical keyword recall"),
        ("abnormal_accuracy", "normal/abnormal accuracy"),
    ):
        rate, count, interval = share(stats[key])
        rows.append([title, rate, f"{count}, Wilson 95% CI {interval}"])
    lines += markdown_table(["metric", "value", "basis"], rows)
    if stats["worst"]:
        lines += ["", "Worst pairs (clinical / modality F1, hand vs judge):", ""]
        lines += markdown_table(
            ["id", "phenomenon", "clinical", "modality", "judge keywords (ref; pred)"],
            [
                [
                    w["id"],
                    w["phenomenon"],
                    f"{_f1(w['clinical_f1']['hand'])} vs {_f1(w['clinical_f1']['judge'])}",
                    f"{_f1(w['modality_f1']['hand'])} vs {_f1(w['modality_f1']['judge'])}",
                    "; ".join(", ".join(k) for k in w["judge_keywords"]),
                ]
                for w in stats["worst"]
            ],
        )
    return [*lines, ""]


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: the sets, then per judge and set both halves."""
    lines = ["# Judges against hand labels", ""]
    for key, record in report["validation_sets"].items():
        if record.get("missing"):
            lines.append(f"- {key}: no validation set at {record['path']}; not measured.")
        else:
            lines.append(
                f"- {key}: {record['path']}, {record['n']} pairs ({record['heldout']} "
                f"held-out, {record['tune']} tuning), sha256 {record['sha256'][:12]}"
            )
            if "seen_in_tuning" in record:
                lines[-1] += (
                    f"; {record['seen_in_tuning']} repeat a pair of a tuning set (reported apart)"
                )
    lines += [
        "",
        "Quote only the halves titled plainly 'held-out half': the others were used to "
        "improve the judges.",
        "",
    ]
    for name, entry in report["judges"].items():
        lines += [f"## Judge `{name}` (kind {entry['kind']})", ""]
        for key, reason in entry["skipped"].items():
            lines += [f"- {key}: skipped, {reason}", ""]
        for key, splits in entry["tasks"].items():
            vset = SETS_BY_KEY[key]
            lines += [f"### {key} ({vset.filename})", ""]
            for split in (s for s in (*SPLITS, NEW_PAIRS) if s in splits):
                if splits[split]["n"]:  # a set written all held out has no tuning half
                    lines += vset.measure.markdown(split, splits[split], vset)
        if not entry["tasks"] and not entry["skipped"]:
            lines += ["No task of this judge has a validation set.", ""]
    return "\n".join(lines).rstrip() + "\n"


# --- the record of held-out figures (novabench.judges.figures) ----------------------------

DIAGNOSIS_FIGURES = (
    "decided_accuracy",
    "decided_false_match",
    "decided_missed",
    "undecided",
    "accuracy",
)


def _pooled_proportion(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return proportion(sum(p["k"] for p in parts), sum(p["n"] for p in parts))


def _pooled_mean(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean over the pairs of several sets from each set's mean and count."""
    defined = [p for p in parts if p["mad"] is not None and p["n"]]
    n = sum(p["n"] for p in defined)
    mad = math.fsum(p["mad"] * p["n"] for p in defined) / n if n else None
    return {"mad": mad, "n": n}


def _diagnosis_pooled(sets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {key: _pooled_proportion([s[key] for s in sets]) for key in DIAGNOSIS_FIGURES}


def _caption_pooled(sets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    means = ("clinical_f1", "clinical_f1_read_fully", "clinical_f1_not_read_fully")
    pooled = {key: _pooled_mean([s[key] for s in sets]) for key in means}
    pooled["unread_known"] = sum(s["unread_known"] for s in sets)
    pooled["read_fully"] = sum(s["read_fully"] for s in sets)
    if all("confident" in s for s in sets):  # older entries lack the keyword doubt
        pooled["confident"] = _pooled_proportion([s["confident"] for s in sets])
        pooled["clinical_f1_confident"] = _pooled_mean([s["clinical_f1_confident"] for s in sets])
    return pooled


def _diagnosis_set(held: Mapping[str, Any]) -> dict[str, Any]:
    return {key: held[key] for key in DIAGNOSIS_FIGURES}


def _caption_set(held: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "clinical_f1": {"mad": held["clinical_f1_mad"], "n": held["clinical_f1_n"]},
        "clinical_f1_read_fully": dict(held["clinical_f1_read_fully"]),
        "clinical_f1_not_read_fully": dict(held["clinical_f1_not_read_fully"]),
        "unread_known": held["unread_known"],
        "read_fully": held["read_fully"],
        "confident": dict(held["confident"]),
        "clinical_f1_confident": dict(held["clinical_f1_confident"]),
    }


def heldout_figures(
    task: str, results: Mapping[str, Any], files: Mapping[str, Any]
) -> dict[str, Any] | None:
    """One judge's figures on ``task`` from its judge-report results (``results`` keyed by
    set, ``files`` the report's ``validation_sets``): per quotable held-out half and
    pooled, the judge's own at the top and those of a measure with a ``record_key`` under
    that key; None when no half of the judge's own was measured."""
    groups: dict[str | None, tuple[set[Measure], list[dict[str, Any]]]] = {}
    for key, splits in results.items():
        vset = SETS_BY_KEY[key]
        held = splits.get("heldout") or {}
        if vset.task != task or not vset.reported("heldout") or not held.get("n"):
            continue
        measures, sets = groups.setdefault(vset.measure.record_key, (set(), []))
        measures.add(vset.measure)
        measured = {"set": key, "file": vset.filename, "sha256": files[key]["sha256"]}
        sets.append(
            {**measured, "half": "heldout", "n": held["n"], **vset.measure.set_figures(held)}
        )
    if None not in groups:
        return None
    out: dict[str, Any] = {"task": task}
    for record_key, (measures, sets) in groups.items():
        if len(measures) > 1:
            raise NovaError(
                f"the validation sets of {task} are measured in more than one way",
                f"give every set of {task} the same measure in {REGISTRY.name}",
            )
        pooled = measures.pop().pooled(sets)
        pooled["n"] = sum(s["n"] for s in sets)
        figures = {"pooled": pooled, "sets": sets}
        if record_key is None:
            out.update(figures)
        else:
            out[record_key] = figures
    return out


def record_entries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's entries of every judge a judge report measured on a held-out half."""
    entries = []
    for entry in report["judges"].values():
        for task, identity in (entry.get("identity") or {}).items():
            figures = heldout_figures(task, entry["tasks"], report["validation_sets"])
            if figures is not None:
                entries.append({"task": task, "identity": verdict_identity(identity), **figures})
    return entries


def write_record(report: Mapping[str, Any], path: Path) -> list[dict[str, Any]]:
    """Put the judges ``report`` measured into the record at ``path``: a judge measured now
    replaces every earlier entry of its kind and task (an older version of it); entries
    of judges not measured now (an LLM judge without its key) stay."""
    new = record_entries(report)
    measured = {(e["task"], e["identity"].get("name")) for e in new}
    kept = (
        [e for e in read_record(path) if (e["task"], e["identity"].get("name")) not in measured]
        if Path(path).is_file()
        else []
    )
    entries = sorted([*kept, *new], key=lambda e: (e["task"], json.dumps(e["identity"])))
    body = {
        "about": (
            "Held-out error of each judge against the hand-labelled sets of this folder, by "
            f"judge identity. Written by `{REMEASURE}`; do not edit by hand."
        ),
        "judges": entries,
    }
    # Whole or not at all: the record is committed data every score file reads.
    atomic_write_text(Path(path), json.dumps(body, indent=2, sort_keys=True) + "\n")
    return new


# --- one line per half, as the command prints it -------------------------------------------


def diagnosis_summary(held: Mapping[str, Any]) -> str:
    inside = {True: "yes", False: "no", None: "n/a"}[held["bracket"]["inside"]]
    return (
        f"accuracy as scored {k_of_n(held['accuracy'])}, false matches "
        f"{k_of_n(held['false_match'])}, missed {k_of_n(held['missed'])}; undecided "
        f"{k_of_n(held['undecided'])}, decided accuracy {k_of_n(held['decided_accuracy'])}; "
        f"hand share of true matches inside the bracket: {inside}"
    )


def caption_summary(held: Mapping[str, Any]) -> str:
    line = f"Clinical F1 mean abs. difference {_f1(held['clinical_f1_mad'])}"
    if held.get("unread_known"):
        fully, rest = held["clinical_f1_read_fully"], held["clinical_f1_not_read_fully"]
        line += (
            f" ({_f1(fully['mad'])} on {fully['n']} pairs read fully, "
            f"{_f1(rest['mad'])} on {rest['n']} with unread words)"
        )
    return line + confident_summary(held)


def confident_summary(held: Mapping[str, Any]) -> str:
    """The confident pairs' share and Clinical F1 difference, and the second rater's."""
    line = ""
    if held.get("doubt_known"):
        confident = held["confident"]
        line += (
            f"; confident {percent(confident['rate'])} ({k_of_n(confident)}), Clinical F1 "
            f"mean abs. difference on them {_f1(held['clinical_f1_confident']['mad'])}"
        )
    if "second_rater_clinical_f1" in held:
        second = held["second_rater_clinical_f1"]
        line += f"; second rater {_f1(second['mad'])} on {second['n']} pairs"
    return line


# --- the registry of sets ----------------------------------------------------------------------

#: The ways a set measures a judge, by the name the registry gives as a set's ``measure``:
#: ``match`` (each pair's hand label says whether the prediction names the reference's
#: disease), ``keywords`` (each caption's hand keywords and normal/abnormal label) and
#: ``raw-answers`` (raw answers read and judged end to end: :mod:`.raw_validation`).
MEASURES: dict[str, Measure] = {
    "match": Measure(
        DIAGNOSIS_FIELDS,
        diagnosis_agreement,
        diagnosis_markdown,
        diagnosis_summary,
        _diagnosis_set,
        _diagnosis_pooled,
        _attach_second_rater,
    ),
    "keywords": Measure(
        CAPTION_FIELDS,
        caption_agreement,
        caption_markdown,
        caption_summary,
        _caption_set,
        _caption_pooled,
        _attach_second_rater,
    ),
    "raw-answers": Measure(
        raw_validation.RAW_FIELDS,
        raw_validation.raw_agreement,
        raw_validation.raw_markdown,
        raw_validation.raw_summary,
        raw_validation.raw_set_figures,
        raw_validation.raw_pooled,
        raw_validation.attach_second_rater,
        record_key="end_to_end",
    ),
}

#: The registry of sets, as data (its header says what each field holds).
REGISTRY = paths.RESOURCES / "validation_sets.yaml"
REGISTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sets"],
    "properties": {
        "sets": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "task", "measure", "file", "title"],
                "properties": {
                    "key": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
                    # A built-in task (found by reading its folder: no task is loaded).
                    "task": {"enum": list(builtin_task_names())},
                    "measure": {"enum": sorted(MEASURES)},
                    # A file name of the validation folder, no path.
                    "file": {"type": "string", "pattern": r"^[^/\\]+\.jsonl$"},
                    "title": {"type": "string", "minLength": 1},
                    "tuned_on": {
                        "type": "array",
                        "items": {"enum": list(SPLITS)},
                        "uniqueItems": True,
                    },
                },
            },
        },
    },
}


def check_registry(data: Any, path: Path) -> None:
    """The registry's shape (REGISTRY_SCHEMA), and no key or file listed twice; NovaError
    in one line naming the file and the set."""
    fix = f"correct {Path(path).name} (its header says what each field holds)"
    try:
        jsonschema.validate(data, REGISTRY_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "top level"
        if len(exc.absolute_path) >= 2:
            entry = data["sets"][exc.absolute_path[1]]
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                where += f" ({entry['key']!r})"
        message = f"malformed validation-set registry {path} at {where}: {exc.message}"
        raise NovaError(message, fix) from None
    for field in ("key", "file"):
        values = [entry[field] for entry in data["sets"]]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise NovaError(f"validation-set registry {path} lists {field} {twice[0]!r} twice", fix)


def read_registry(path: Path = REGISTRY) -> tuple[ValidationSet, ...]:
    """The sets the registry at ``path`` lists, in its order."""
    _, data = read_yaml(path, "validation-set registry", "restore it from the repository")
    check_registry(data, path)
    return tuple(
        ValidationSet(
            key=entry["key"],
            task=entry["task"],
            measure=MEASURES[entry["measure"]],
            filename=entry["file"],
            title=entry["title"],
            tuned_on=tuple(entry.get("tuned_on", ("tune",))),
        )
        for entry in data["sets"]
    )


VALIDATION_SETS = read_registry()
SETS_BY_KEY = {s.key: s for s in VALIDATION_SETS}
