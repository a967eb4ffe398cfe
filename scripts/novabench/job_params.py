"""Job parameters that carry text from the config without carrying it raw.

Snakemake shows each job's parameters in its HTML report (``snakemake --report``) as
``name=value`` inside a ``<script>`` block of JSON, and does not escape ``</script``: a
config string such as an LLM judge's ``model`` or a ``local_path`` holding
``</script><script>...`` would end that block and run as script in the page. It also
compares parameters between runs by their ``repr``. :class:`InertParam` is a mapping
parameter whose text (its ``repr``, which is also its ``str``) is canonical JSON with
``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e``, ``\\u0026``: the same content
gives the same text (a change still re-runs the job), and no text can open or close
markup. The job script receives it as the mapping it is.

:class:`DigestParam` is one whose text is a short digest of that JSON: Snakemake prints
every changed parameter's text in its "reason: Params have changed" line, and a listing of
the run's code (hundreds of files with their hashes) would make that one line tens of
thousands of characters long. The job still receives the whole mapping, and writes it
where it belongs (the manifest).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def inert_json(value: Any) -> str:
    """``value`` as sorted, ASCII-only JSON in which no character can open or end markup."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class InertParam(dict):
    """A mapping job parameter whose text form is :func:`inert_json` of its content."""

    def __repr__(self) -> str:
        return inert_json(self)

    __str__ = __repr__


class DigestParam(InertParam):
    """A mapping job parameter whose text is ``sha256:`` and 16 hex digits of its
    :func:`inert_json`: the same content gives the same text, a change another."""

    def __repr__(self) -> str:
        return "sha256:" + hashlib.sha256(inert_json(self).encode()).hexdigest()[:16]

    __str__ = __repr__


def inert_param(value: Any) -> Any:
    """``value`` as an :class:`InertParam` when it is a mapping; other values unchanged."""
    return InertParam(value) if isinstance(value, Mapping) else value
