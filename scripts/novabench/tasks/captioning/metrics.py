"""Task 2 (image captioning) metrics: BLEU-4, METEOR, BERT F1, Clinical/Modality F1, Binary F1.

Unit: the image. Every metric is on a 0-100 scale.

- Tokens: lower-cased text split by sacrebleu's ``13a`` tokenizer (the mteval-v13a rules,
  no data files). It separates punctuation from words ("lesion." -> "lesion ."), which
  nltk's Treebank tokenizer does only at the very end of a text, and captions are often
  several sentences long. BLEU and METEOR see the same tokens.
- BLEU-4: nltk ``corpus_bleu``, uniform weights, smoothing ``method3`` (NIST geometric
  smoothing, the same as sacrebleu's default ``exp``). On the same tokens it equals
  sacrebleu's corpus BLEU whenever every hypothesis has at least 4 tokens; for shorter
  hypotheses nltk counts at least one n-gram per order (its ``max(1, count)``
  denominator), sacrebleu counts none.
- METEOR: nltk ``meteor_score`` (alpha 0.9, beta 3, gamma 0.5, Porter stemmer) with the
  real WordNet 3.0 (see ``novabench.wordnet``); mean over images. nltk compares WordNet
  synonyms of the *stemmed* hypothesis word with the *stemmed* reference word, so a
  synonym pair only matches where Porter leaves the words intact (e.g. tumor/tumour).
- BERT F1: BERTScore F1 per image with a configurable encoder, mean over images
  (``novabench.tasks.captioning.bertscore``); null, with the reason recorded, where the encoder
  cannot be loaded.
- Clinical F1 / Modality F1: per-image set F1 of judge keywords, averaged over images
  (macro). An image where both sets are empty has no defined F1 and is left out of the
  average (counted in ``*_n_both_empty``): scoring it 1.0 would reward saying nothing,
  scoring it 0 would punish a correct silence. Secondary columns: ``*_global`` (F1 of the
  union of all reference keywords against the union of all predicted keywords) and
  ``*_micro`` (true/false positives and false negatives summed over images).
- Binary F1: normal vs abnormal from the judge's labels, positive class = abnormal.
- The judge sees each (reference, prediction) pair (:func:`judge_caption_pairs`: in one
  request where it judges pairs, as the paper's LLM judge does). An image it gave no verdict
  on (a failed request or an unreadable answer, within the judge's allowed failure rate) is
  left out of Clinical, Modality and Binary F1, not scored as an empty caption: the judge's
  failure is not the model's. It is counted (``judge_failures``, ``judge_failure_rate``,
  percent of scored images) and marked in the per-image table (``judged`` false).
- Unread share: the share of a caption's content words the judge could not read
  (``KeywordSet.unread_share``; the keyword judge's docstring defines a content word),
  per image for the reference and the prediction (``ref_unread_share``,
  ``pred_unread_share``, 0-1). The summary gives ``Unread_share``, the mean over both
  captions of every judged image (x100), the means per side, and ``pairs_read_fully``, the
  judged images whose two captions it read fully (share 0). Keyword F1 is only as good as
  the judge's reading of the words: the judge report gives its error on fully read pairs
  and on the rest. All null for a judge that does not say (an LLM reads every word).
- Keyword doubt: how many Clinical F1 points a pair's unread words could move its F1
  (:func:`novabench.caption_keywords.keyword_doubt`), per image (``keyword_doubt``) with
  ``confident`` (doubt at most ``CONFIDENT_DOUBT``); the summary gives ``Confident_share``
  and ``Clinical_F1_confident`` (macro Clinical F1 on the confident pairs) beside
  ``Clinical_F1``. Null for a judge that does not count unread words.

Statuses of a prediction: ``ok`` (scored as is), ``parse_error`` (the model answered but
no caption could be read: scored as an empty caption, so it counts against the model),
``refusal`` (the model declined, e.g. "I can't help with that": never scored as a caption),
``error`` (no answer: the request failed) and ``missing`` (no answer on file: always scored
as an empty caption). How many failed requests a run may have is decided when predicting
(``max_error_rate``); here ``on_error`` says what to do with errors and refusals alike:
``"empty"`` (default; scored as an empty caption, as localization scores them as an image
without boxes, so every image stays in the denominators), ``"exclude"`` (left out of the
metrics) or ``"raise"``. Each status is counted and reported as a rate either way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from novabench.caption_keywords import is_confident, pair_doubt, set_f1, split_keywords
from novabench.errors import NovaError
from novabench.metrics.status import RATE_STATUSES, STATUSES, status_summary
from novabench.tasks.captioning.verdicts import hypotheses, judge_captions, pair_verdicts

if TYPE_CHECKING:
    from novabench.judge_verdicts import CaptionJudge, KeywordSet, PairedCaptionJudge

TOKENIZER = "lowercase+sacrebleu-13a"
BLEU_SMOOTHING = "nltk-method3 (NIST geometric; = sacrebleu smooth_method='exp')"
BLEU_WEIGHTS = (0.25, 0.25, 0.25, 0.25)
METEOR_PARAMS = {"alpha": 0.9, "beta": 3.0, "gamma": 0.5, "stemmer": "nltk PorterStemmer"}
# Statuses that ``on_error`` handles: no answer, or an answer that declined the task.
FAILED = ("error", "refusal")


@functools.cache
def _tokenizer_13a():
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


def tokenize(text: str) -> list[str]:
    """Lower-case ``text`` and split it with sacrebleu's 13a tokenizer."""
    return _tokenizer_13a()(text.lower()).split()


def _smoothing():
    from nltk.translate.bleu_score import SmoothingFunction

    return SmoothingFunction().method3


def bleu4(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus BLEU-4 x100 of ``hypotheses`` against one reference each."""
    from nltk.translate.bleu_score import corpus_bleu

    _check_lengths(references, hypotheses)
    refs = [[tokenize(ref)] for ref in references]
    hyps = [tokenize(hyp) for hyp in hypotheses]
    score = corpus_bleu(refs, hyps, weights=BLEU_WEIGHTS, smoothing_function=_smoothing())
    return 100.0 * float(score)


def sentence_bleu4(reference: str, hypothesis: str) -> float:
    """Sentence BLEU-4 x100 with the corpus settings (for inspecting single images only)."""
    from nltk.translate.bleu_score import sentence_bleu

    score = sentence_bleu(
        [tokenize(reference)],
        tokenize(hypothesis),
        weights=BLEU_WEIGHTS,
        smoothing_function=_smoothing(),
    )
    return 100.0 * float(score)


def meteor(
    references: Sequence[str], hypotheses: Sequence[str], nltk_data_dir: Path
) -> tuple[float, list[float]]:
    """Mean METEOR x100 and the per-image scores x100, with WordNet 3.0 from ``nltk_data_dir``."""
    from nltk.stem.porter import PorterStemmer
    from nltk.translate.meteor_score import meteor_score

    from novabench.wordnet import ensure_wordnet, load_wordnet

    _check_lengths(references, hypotheses)
    if nltk_data_dir is None:
        raise NovaError(
            "METEOR needs WordNet 3.0 but no NLTK data folder was given",
            "pass the folder where WordNet is (or is to be) installed as nltk_data_dir",
        )
    ensure_wordnet(Path(nltk_data_dir))
    wordnet = load_wordnet(Path(nltk_data_dir))
    stemmer = PorterStemmer()
    scores = [
        100.0
        * meteor_score(
            [tokenize(ref)],
            tokenize(hyp),
            stemmer=stemmer,
            wordnet=wordnet,
            alpha=METEOR_PARAMS["alpha"],
            beta=METEOR_PARAMS["beta"],
            gamma=METEOR_PARAMS["gamma"],
        )
        for ref, hyp in zip(references, hypotheses, strict=True)
    ]
    mean = math.fsum(scores) / len(scores) if scores else float("nan")
    return mean, scores


def keyword_f1(
    ref_sets: Sequence[Iterable[str]], pred_sets: Sequence[Iterable[str]]
) -> dict[str, Any]:
    """Keyword F1 x100: per-image macro average, global-set and micro variants.

    Returns ``macro`` (mean per-image F1 over images where either set is non-empty, None if
    there are none), ``n`` (images averaged), ``n_both_empty`` (images left out),
    ``global``, ``micro`` and ``per_image`` (None where undefined).
    """
    _check_lengths(ref_sets, pred_sets)
    refs = [frozenset(s) for s in ref_sets]
    preds = [frozenset(s) for s in pred_sets]
    per_image = [set_f1(r, p) for r, p in zip(refs, preds, strict=True)]
    defined = [f for f in per_image if f is not None]
    true_pos = sum(len(r & p) for r, p in zip(refs, preds, strict=True))
    n_ref = sum(len(r) for r in refs)
    n_pred = sum(len(p) for p in preds)
    return {
        "macro": math.fsum(defined) / len(defined) if defined else None,
        "n": len(defined),
        "n_both_empty": len(per_image) - len(defined),
        "global": set_f1(frozenset().union(*refs), frozenset().union(*preds)),
        "micro": 100.0 * 2 * true_pos / (n_ref + n_pred) if n_ref + n_pred else None,
        "per_image": per_image,
    }


def binary_f1(ref_labels: Sequence[bool], pred_labels: Sequence[bool]) -> dict[str, Any]:
    """Normal vs abnormal (positive = abnormal): F1 and accuracy x100 and the confusion counts.

    F1 is None when neither side has a positive (undefined).
    """
    _check_lengths(ref_labels, pred_labels)
    pairs = list(zip(map(bool, ref_labels), map(bool, pred_labels), strict=True))
    tp = sum(r and p for r, p in pairs)
    fp = sum(p and not r for r, p in pairs)
    fn = sum(r and not p for r, p in pairs)
    tn = sum(not r and not p for r, p in pairs)
    return {
        "f1": 100.0 * 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None,
        "accuracy": 100.0 * (tp + tn) / len(pairs) if pairs else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def _check_lengths(a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} references but {len(b)} predictions")


def _records(records: Iterable[Mapping[str, Any]] | pd.DataFrame) -> list[dict[str, Any]]:
    """Validate per-image records: filename, reference, prediction (str or None), status."""
    rows = records.to_dict("records") if isinstance(records, pd.DataFrame) else list(records)
    seen: set[str] = set()
    out = []
    for row in rows:
        missing = {"filename", "reference", "prediction", "status"} - set(row)
        if missing:
            raise NovaError(
                f"caption record {row.get('filename', row)!r} lacks {sorted(missing)}",
                "give each record filename, reference, prediction and status",
            )
        filename, status, prediction = row["filename"], row["status"], row["prediction"]
        if filename in seen:
            raise NovaError(f"image {filename} appears twice in the captions to score")
        seen.add(filename)
        if status not in STATUSES:
            raise NovaError(f"image {filename} has status {status!r}", f"use one of {STATUSES}")
        if not isinstance(prediction, str):
            prediction = None  # a DataFrame gives NaN for a missing caption
        if status == "ok" and not isinstance(prediction, str):
            raise NovaError(f"image {filename} has status ok but no caption text")
        reference = row["reference"]
        if not isinstance(reference, str) or not reference.strip():
            raise NovaError(f"image {filename} has no reference caption")
        out.append(
            {
                "filename": filename,
                "reference": reference,
                "prediction": prediction,
                "status": status,
            }
        )
    return out


def _join(keywords: frozenset[str]) -> str:
    return "; ".join(sorted(keywords))


PER_IMAGE_COLUMNS = (
    "filename",
    "status",
    "bleu",
    "meteor",
    "bert_f1",
    "clinical_f1",
    "modality_f1",
    "ref_abnormal",
    "pred_abnormal",
    "ref_clinical",
    "pred_clinical",
    "ref_modality",
    "pred_modality",
    "judged",
    "ref_unread_share",
    "pred_unread_share",
    "keyword_doubt",
    "confident",
)


def scored_rows(rows: list[dict[str, Any]], on_error: str) -> list[dict[str, Any]]:
    """The records that enter the metrics under ``on_error``."""
    n_failed = sum(r["status"] in FAILED for r in rows)
    if n_failed and on_error == "raise":
        raise NovaError(
            f"{n_failed} of {len(rows)} images have no caption because the request failed "
            "or the model refused (status error or refusal)",
            "re-run predict to resume failed requests (received answers are cached), or "
            "score with on_error empty or exclude",
        )
    scored = [r for r in rows if on_error != "exclude" or r["status"] not in FAILED]
    if not scored:
        raise NovaError("no caption to score", "run captioning inference first")
    return scored


def _metric_summary(
    refs: list[str],
    hyps: list[str],
    meteor_mean: float,
    bert: BertF1,
    clinical: dict[str, Any],
    modality: dict[str, Any],
    binary: dict[str, Any],
) -> dict[str, Any]:
    return {
        "BLEU-4": bleu4(refs, hyps),
        "METEOR": meteor_mean,
        "BERT_F1": bert.mean,
        "Clinical_F1": clinical["macro"],
        "Modality_F1": modality["macro"],
        "Clinical_F1_global": clinical["global"],
        "Modality_F1_global": modality["global"],
        "Clinical_F1_micro": clinical["micro"],
        "Modality_F1_micro": modality["micro"],
        "Binary_F1": binary["f1"],
        "Binary_accuracy": binary["accuracy"],
        "binary_tp": binary["tp"],
        "binary_fp": binary["fp"],
        "binary_fn": binary["fn"],
        "binary_tn": binary["tn"],
        "Clinical_F1_n": clinical["n"],
        "Clinical_F1_n_both_empty": clinical["n_both_empty"],
        "Modality_F1_n": modality["n"],
        "Modality_F1_n_both_empty": modality["n_both_empty"],
    }


@dataclass(frozen=True)
class BertF1:
    """Per-image BERT F1 x100 (NaN where not computed), their mean, what computed them
    (``novabench.tasks.captioning.bertscore``)."""

    per_image: list[float]
    mean: float | None
    identity: dict[str, Any]


def _no_bert_f1(n: int) -> BertF1:
    return BertF1([math.nan] * n, None, {"status": "disabled", "reason": "no scorer given"})


def _implementations(nltk_data_dir: Path) -> dict[str, Any]:
    """What computed the text metrics: settings, library versions and the WordNet used."""
    from novabench.wordnet import wordnet_identity

    return {
        "tokenizer": TOKENIZER,
        "bleu_smoothing": BLEU_SMOOTHING,
        "bleu_implementation": f"nltk {version('nltk')} corpus_bleu",
        "meteor_implementation": f"nltk {version('nltk')} meteor_score",
        "meteor_params": dict(METEOR_PARAMS),
        "tokenizer_implementation": f"sacrebleu {version('sacrebleu')} 13a",
        "wordnet": wordnet_identity(Path(nltk_data_dir)),
    }


def _judge_columns(verdict: tuple[KeywordSet, KeywordSet] | None) -> dict[str, Any]:
    """An image's judge columns; no verdict: no labels and no keywords, ``judged`` false."""
    if verdict is None:
        columns = ("ref_clinical", "pred_clinical", "ref_modality", "pred_modality")
        return {**dict.fromkeys(columns, ""), "judged": False}
    ref_k, pred_k = verdict
    (ref_clinical, ref_modality), (pred_clinical, pred_modality) = (
        split_keywords(ref_k.keywords),
        split_keywords(pred_k.keywords),
    )
    return {
        "ref_abnormal": ref_k.abnormal,
        "pred_abnormal": pred_k.abnormal,
        "ref_clinical": _join(ref_clinical),
        "pred_clinical": _join(pred_clinical),
        "ref_modality": _join(ref_modality),
        "pred_modality": _join(pred_modality),
        "judged": True,
        "ref_unread_share": ref_k.unread_share,
        "pred_unread_share": pred_k.unread_share,
        "keyword_doubt": pair_doubt(ref_k, pred_k),
        "confident": is_confident(pair_doubt(ref_k, pred_k)),
    }


def _per_image_table(
    rows: list[dict[str, Any]],
    scored: list[dict[str, Any]],
    texts: tuple[list[str], list[str]],
    verdicts: dict[int, tuple[KeywordSet, KeywordSet]],
    per_image_scores: dict[str, list],
) -> pd.DataFrame:
    """One row per image; an image left out of the metrics has its status only."""
    refs, hyps = texts
    per_image = []
    scored_at = {r["filename"]: i for i, r in enumerate(scored)}
    for row in rows:
        i = scored_at.get(row["filename"])
        if i is None:
            per_image.append({"filename": row["filename"], "status": row["status"]})
            continue
        per_image.append(
            {
                "filename": row["filename"],
                "status": row["status"],
                "bleu": sentence_bleu4(refs[i], hyps[i]),
                **{name: values[i] for name, values in per_image_scores.items()},
                **_judge_columns(verdicts.get(i)),
            }
        )
    table = pd.DataFrame(per_image, columns=list(PER_IMAGE_COLUMNS))
    for column in ("bleu", "meteor", "bert_f1", "clinical_f1", "modality_f1"):
        table[column] = table[column].astype("float64")
    for column in ("ref_unread_share", "pred_unread_share", "keyword_doubt"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("float64")
    for column in ("ref_abnormal", "pred_abnormal", "judged", "confident"):
        table[column] = table[column].astype("boolean")
    return table


def unread_summary(verdicts: Iterable[tuple[KeywordSet, KeywordSet]]) -> dict[str, Any]:
    """The judge's unread shares over the judged images: ``Unread_share`` (x100, mean over
    both captions of each pair), the mean per side (x100), ``pairs_read_fully`` (pairs
    whose two captions have share 0) of ``pairs_with_unread_share``; all null where the
    judge gives no share."""
    pairs = [(r.unread_share, p.unread_share) for r, p in verdicts]
    known = [(r, p) for r, p in pairs if r is not None and p is not None]

    def mean(values: list[float]) -> float | None:
        return 100.0 * math.fsum(values) / len(values) if values else None

    return {
        "Unread_share": mean([s for pair in known for s in pair]),
        "ref_unread_share_mean": mean([r for r, _ in known]),
        "pred_unread_share_mean": mean([p for _, p in known]),
        "pairs_read_fully": sum(r == 0 and p == 0 for r, p in known) if known else None,
        "pairs_with_unread_share": len(known),
    }


def confident_summary(
    verdicts: Sequence[tuple[KeywordSet, KeywordSet]], clinical_f1: Sequence[float | None]
) -> dict[str, Any]:
    """The pairs whose keyword doubt is small enough to trust (``confident``, see
    :mod:`novabench.caption_keywords`): ``Confident_share`` (x100) of
    ``pairs_with_keyword_doubt``, and ``Clinical_F1_confident``, the macro Clinical F1 on
    them (``Clinical_F1_confident_n`` images with F1 defined) beside ``Clinical_F1`` on all;
    all null where the judge gives no doubt. ``clinical_f1``: each verdict's F1."""
    confident = [is_confident(pair_doubt(r, p)) for r, p in verdicts]
    known = [c for c in confident if c is not None]
    on_confident = [
        f1 for f1, c in zip(clinical_f1, confident, strict=True) if c and f1 is not None
    ]
    return {
        "Confident_share": 100.0 * sum(known) / len(known) if known else None,
        "pairs_with_keyword_doubt": len(known),
        "Clinical_F1_confident": math.fsum(on_confident) / len(on_confident)
        if on_confident
        else None,
        "Clinical_F1_confident_n": len(on_confident),
    }


def _judged_f1(
    n_scored: int, verdicts: Mapping[int, Any], f1: Mapping[str, Mapping[str, Any]]
) -> dict[str, list[float | None]]:
    """Keyword F1 back onto the scored images; None where the judge gave no verdict."""
    judged_at = {i: j for j, i in enumerate(verdicts)}
    return {
        f"{name}_f1": [
            values["per_image"][judged_at[i]] if i in judged_at else None for i in range(n_scored)
        ]
        for name, values in f1.items()
    }


def checked_records(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame, on_error: str = "empty"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every record, the records that enter the metrics under ``on_error``), checked."""
    if on_error not in ("empty", "exclude", "raise"):
        raise ValueError(f"on_error must be empty, exclude or raise, not {on_error!r}")
    rows = _records(records)
    return rows, scored_rows(rows, on_error)


def _answered_summaries(
    scored: Sequence[Mapping[str, Any]],
    hyps: Sequence[str],
    judged: Mapping[int, tuple[KeywordSet, KeywordSet]],
    clinical_f1: Sequence[float | None],
) -> dict[str, Any]:
    """:func:`unread_summary` and :func:`confident_summary` over the pairs with an answer
    only: an empty caption scored in place of a failure or refusal has no word to read, so
    it would count as read fully and as confident. ``clinical_f1``: per verdict of
    ``judged``, in its order."""
    answered = [
        (verdict, f1)
        for (i, verdict), f1 in zip(judged.items(), clinical_f1, strict=True)
        if scored[i]["status"] == "ok" and hyps[i].strip()
    ]
    verdicts = [verdict for verdict, _ in answered]
    return {
        **unread_summary(verdicts),
        **confident_summary(verdicts, [f1 for _, f1 in answered]),
    }


def score_captioning(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame,
    judge: CaptionJudge | PairedCaptionJudge,
    nltk_data_dir: Path,
    on_error: Literal["empty", "exclude", "raise"] = "empty",
    bert_f1: Callable[[list[str], list[str]], BertF1] | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Judge and score captions in one call (a notebook, the tests): the reading stage's
    :func:`~novabench.tasks.captioning.verdicts.judge_captions` on the scored records,
    then :func:`aggregate_captioning`."""
    _, scored = checked_records(records, on_error)
    verdicts = judge_captions(scored, judge)
    return aggregate_captioning(
        records, verdicts, judge.identity(), nltk_data_dir, on_error, bert_f1
    )


def aggregate_captioning(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame,
    verdicts: Sequence[Mapping[str, Any] | None],
    judge: Mapping[str, Any] | None,
    nltk_data_dir: Path,
    on_error: Literal["empty", "exclude", "raise"] = "empty",
    bert_f1: Callable[[list[str], list[str]], BertF1] | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Score captions from their stored verdicts: the summary (all metrics x100, counts,
    identities) and a per-image table.

    ``records`` hold ``filename``, ``reference``, ``prediction`` (text or None) and
    ``status``; ``verdicts`` (:mod:`.verdicts`) are those of the records scored under
    ``on_error``, in order, and ``judge`` the identity of the judge that gave them.
    ``on_error`` handles images whose request failed or that the model refused (see the
    module docstring). ``bert_f1(references, hypotheses)``: BERT F1 with its settings bound
    (``novabench.tasks.captioning.bertscore.bert_f1``); None computes none. Status counts
    and rates use the keys of ``novabench.metrics.status``.
    """
    rows, scored = checked_records(records, on_error)
    refs = [r["reference"] for r in scored]
    hyps = hypotheses(scored)
    judged = pair_verdicts(verdicts)

    meteor_mean, meteor_per_image = meteor(refs, hyps, nltk_data_dir)
    bert = bert_f1(refs, hyps) if bert_f1 is not None else _no_bert_f1(len(refs))
    ref_keys = [ref for ref, _ in judged.values()]
    pred_keys = [pred for _, pred in judged.values()]
    ref_split = [split_keywords(k.keywords) for k in ref_keys]
    pred_split = [split_keywords(k.keywords) for k in pred_keys]
    clinical = keyword_f1([r[0] for r in ref_split], [p[0] for p in pred_split])
    modality = keyword_f1([r[1] for r in ref_split], [p[1] for p in pred_split])
    binary = binary_f1([k.abnormal for k in ref_keys], [k.abnormal for k in pred_keys])

    summary = _metric_summary(refs, hyps, meteor_mean, bert, clinical, modality, binary)
    summary.update({"n_images": len(rows), "n_scored": len(scored)})
    n_failures = len(scored) - len(judged)
    summary["judge_failures"] = n_failures
    summary["judge_failure_rate"] = 100.0 * n_failures / len(scored)
    summary.update(_answered_summaries(scored, hyps, judged, clinical["per_image"]))
    summary.update(status_summary((r["status"] for r in rows), STATUSES, RATE_STATUSES))
    summary["on_error"] = on_error
    summary.update(_implementations(nltk_data_dir))
    summary["judge"] = judge
    summary["bertscore"] = bert.identity

    per_image_scores = {
        "meteor": meteor_per_image,
        "bert_f1": bert.per_image,
        **_judged_f1(len(scored), judged, {"clinical": clinical, "modality": modality}),
    }
    table = _per_image_table(rows, scored, (refs, hyps), judged, per_image_scores)
    return summary, table
