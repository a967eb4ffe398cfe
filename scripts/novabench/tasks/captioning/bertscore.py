"""BERT F1 (BERTScore F1) of captions, one value per image, through the ``bert-score`` package.

Settings: ``tasks.captioning.bertscore`` (defaults in
``novabench.tasks.captioning.BERTSCORE_DEFAULTS``, documented in config/README.md):

- ``model``: a Hugging Face model id or a local folder in the ``save_pretrained`` layout.
  Default ``roberta-large``, bert-score's English default (the paper does not name its
  encoder). A biomedical option is ``allenai/scibert_scivocab_uncased`` (bert-score's
  choice for scientific English: layer 8, baseline shipped).
- ``revision``: the Hub revision of a model id (branch, tag or commit); the commit it
  resolved to is recorded.
- ``num_layers``: the layer whose token embeddings are matched; null takes bert-score's
  tuned layer for a model it knows (``roberta-large``: 17) and must be set for others.
- ``rescale_with_baseline``: false (default) reports bert-score's raw F1, the package's
  own default and defined for every encoder; true rescales with bert-score's baseline for
  the model (or the ``baseline`` file given), which spreads the scores but has no
  baseline for most local or biomedical encoders.

Decisions: values x100, mean over images as the headline; no idf weighting (bert-score's
default: idf weights would come from the scored references, making one image's score
depend on the others, which a per-image bootstrap cannot resample). An empty hypothesis
(parse error, refusal or failed request scored as an empty caption) gets bert-score's F1
of an empty candidate, 0 before rescaling; it is set here because bert-score 0.3.13
cannot encode an empty text with transformers 5.

When the encoder cannot be had (not in the Hugging Face cache while the Hub is
unreachable or ``HF_HUB_OFFLINE`` is set, a folder without weights, a model with no known
layer) BERT F1 is null, the score file records why in one line and the log warns once;
the other captioning metrics are computed as usual. A download is tried only after a
quick connection check, so an offline run never waits on the network.

Only the captioning task's scorer imports this module (``Captioning.score``, run by the
scoring stage), and bert-score, torch and transformers only when an encoder is loaded, so
they are needed in the scoring environment only.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.tasks.captioning import bertscore_settings
from novabench.tasks.captioning.metrics import BertF1

log = logging.getLogger(__name__)

KEY = "tasks.captioning.bertscore"
HUB_TIMEOUT_S = 10.0
# Files a snapshot needs: config, tokenizer, and the weights in one format.
_CONFIG_FILES = ["*.json", "*.txt", "*.model"]
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


class EncoderUnavailable(NovaError):
    """The BERTScore encoder cannot be loaded here; BERT F1 is left out, with this reason."""


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(
        folder.glob(pattern) for pattern in ("*.safetensors", "pytorch_model*.bin")
    )


def _missing(model: str, why: str) -> EncoderUnavailable:
    return EncoderUnavailable(
        f"the encoder {model} is not in the Hugging Face cache and {why}",
        f"download it once (`hf download {model}`), point {KEY}.model at a local folder, "
        f"or set {KEY}.enabled: false",
    )


def _hub_snapshot(model: str, revision: str | None) -> tuple[Path, str]:
    """(folder, commit) of ``model`` from the cache, else downloaded when the Hub answers."""
    from huggingface_hub import HfApi, snapshot_download

    from novabench.dataset.hub import check_hub_reachable, hub_endpoint
    from novabench.errors import HubUnreachableError

    try:
        cached = Path(snapshot_download(model, revision=revision, local_files_only=True))
        if _has_weights(cached):
            return cached, cached.name
    except Exception:  # the hub client raises several types for "not cached"
        pass
    if _offline():
        raise _missing(model, "HF_HUB_OFFLINE is set")
    try:
        check_hub_reachable(model, HUB_TIMEOUT_S)
    except HubUnreachableError as exc:
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        raise _missing(model, f"the Hub at {hub_endpoint()} cannot be reached{detail}") from None
    try:
        info = HfApi().model_info(model, revision=revision, timeout=HUB_TIMEOUT_S)
        names = [s.rfilename for s in info.siblings or []]
        weights = "*.safetensors" if any(n.endswith(".safetensors") for n in names) else "*.bin"
        folder = snapshot_download(
            model, revision=info.sha, allow_patterns=[*_CONFIG_FILES, weights]
        )
    except Exception as exc:  # network and Hub errors come in many types
        raise EncoderUnavailable(
            f"downloading the encoder {model} failed ({type(exc).__name__}: {exc})",
            f"download it by hand or point {KEY}.model at a local folder",
        ) from None
    return Path(folder), str(info.sha)


def locate_encoder(model: str, revision: str | None) -> tuple[Path, str | None]:
    """The encoder's folder and its commit (None when unknown, e.g. a plain folder)."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not _has_weights(folder):
            raise EncoderUnavailable(
                f"the encoder folder {folder} holds no config.json and weights",
                "point it at a folder written by save_pretrained or `hf download --local-dir`",
            )
        # A snapshot folder of the Hugging Face cache is named by its commit.
        return folder, folder.name if _COMMIT.match(folder.name) else revision
    return _hub_snapshot(model, revision)


def _baseline_file(model: str, settings: Mapping[str, Any]) -> str | None:
    """The rescaling baseline: the configured file, else bert-score's own for ``model``."""
    if not settings["rescale_with_baseline"]:
        return None
    if settings["baseline"]:
        return str(settings["baseline"])
    import bert_score

    shipped = Path(bert_score.__file__).parent / "rescale_baseline"
    for language in ("en", "en-sci"):
        if (shipped / language / f"{model}.tsv").is_file():
            return str(shipped / language / f"{model}.tsv")
    raise EncoderUnavailable(
        f"bert-score ships no rescaling baseline for {model}",
        f"set {KEY}.baseline to a baseline file or {KEY}.rescale_with_baseline: false",
    )


@functools.lru_cache(maxsize=4)
def _scorer(settings_json: str) -> tuple[Any, dict[str, Any]]:
    """A loaded ``BERTScorer`` and its identity; loaded once per settings."""
    settings = json.loads(settings_json)
    model = str(settings["model"])
    folder, commit = locate_encoder(model, settings["revision"])
    from bert_score import BERTScorer
    from bert_score.utils import get_hash, model2layers

    num_layers = settings["num_layers"]
    if num_layers is None:
        num_layers = model2layers.get(model)
        if num_layers is None:
            raise EncoderUnavailable(
                f"bert-score has no tuned layer for {model}", f"set {KEY}.num_layers"
            )
    baseline = _baseline_file(model, settings)
    try:
        scorer = BERTScorer(
            model_type=str(folder),
            num_layers=int(num_layers),
            lang="en",
            rescale_with_baseline=baseline is not None,
            baseline_path=baseline,
        )
        _prefix_space_tokenizer(scorer, folder)
    except Exception as exc:  # loading raises many types; the fix is the same
        raise EncoderUnavailable(
            f"cannot load the encoder {model} from {folder} ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]})",
            f"point {KEY}.model at a BERT-like encoder folder and check {KEY}.num_layers",
        ) from None
    rescaled, custom = baseline is not None, bool(settings["baseline"])
    identity = {
        "status": "ok",
        "model": model,
        "revision": settings["revision"],
        "commit": commit,
        "num_layers": int(num_layers),
        "rescale_with_baseline": rescaled,
        "baseline": settings["baseline"],
        "idf": False,
        "bert_score": version("bert-score"),
        "transformers": version("transformers"),
        # bert-score's own summary of the settings (its version string is its __version__).
        "hash": get_hash(model, num_layers, False, rescaled, custom, False),
    }
    return scorer, identity


def _prefix_space_tokenizer(scorer: Any, folder: Path) -> None:
    """RoBERTa and GPT-2 tokenizers need a space before the first word: bert-score asks for
    it per call (``add_prefix_space=True``), which transformers 5 ignores, so the tokenizer
    is loaded with it instead. A tokenizer without a length limit is refused (bert-score
    truncates to it)."""
    from transformers import AutoTokenizer, GPT2Tokenizer, RobertaTokenizer

    if isinstance(scorer._tokenizer, GPT2Tokenizer | RobertaTokenizer):
        scorer._tokenizer = AutoTokenizer.from_pretrained(
            str(folder), use_fast=False, add_prefix_space=True
        )
    if scorer._tokenizer.model_max_length > 100_000:
        raise ValueError("its tokenizer sets no model_max_length")


def bert_f1(
    references: Sequence[str], hypotheses: Sequence[str], settings: Mapping[str, Any] | None
) -> BertF1:
    """BERT F1 x100 of each (reference, hypothesis) pair and the mean over pairs.

    ``settings`` None or ``enabled: false``: not computed (NaN, the reason recorded).
    """
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} predictions")
    nan = [math.nan] * len(references)
    if settings is None or not bertscore_settings(settings)["enabled"]:
        why = "no BERTScore settings given" if settings is None else f"{KEY}.enabled is false"
        return BertF1(nan, None, {"status": "disabled", "reason": why})
    settings = bertscore_settings(settings)
    try:
        scorer, identity = _scorer(json.dumps(settings, sort_keys=True, default=str))
    except EncoderUnavailable as exc:
        reason = f"BERT F1 not computed: {exc}"
        log.warning("%s", reason)
        return BertF1(nan, None, {"status": "unavailable", "reason": reason, **settings})
    filled = [i for i, text in enumerate(hypotheses) if text.strip()]
    # bert-score's F1 of an empty candidate: 0, then rescaled as every other value.
    empty = 0.0
    if identity["rescale_with_baseline"]:
        baseline_f = float(scorer.baseline_vals[2])
        empty = (0.0 - baseline_f) / (1.0 - baseline_f)
    values = [100.0 * empty] * len(references)
    if filled:
        _, _, f1 = scorer.score([hypotheses[i] for i in filled], [references[i] for i in filled])
        for i, value in zip(filled, f1.tolist(), strict=True):
            values[i] = 100.0 * float(value)
    mean = math.fsum(values) / len(values) if values else None
    return BertF1(values, mean, identity)
