"""Captioning's parser, run when the answers are read (stage ``parse``): a caption is the
answer's words with the whitespace folded; an empty answer is a parse error. A module of
its own, so that editing it re-reads and re-scores captioning and re-predicts nothing."""

from __future__ import annotations

from novabench.tasks.base import Parsed


def parse_caption(raw: str) -> Parsed:
    caption = " ".join(raw.split())
    if not caption:
        return Parsed("parse_error", None, "empty answer")
    return Parsed("ok", {"caption": caption})
