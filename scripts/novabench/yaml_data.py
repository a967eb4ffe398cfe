"""Reading the package's YAML data files (vocabulary, corpus): one-line errors that name
the file, and schema violations that name the entry."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from novabench.errors import NovaError


def read_yaml(path: Path, what: str, unreadable_fix: str) -> tuple[bytes, Any]:
    """A data file's bytes (for its hash) and its parsed YAML; ``what`` names the file in
    the one-line errors ("the retrieval corpus")."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise NovaError(f"cannot read {what} {path} ({exc.strerror})", unreadable_fix) from exc
    try:
        # The C loader when libyaml is present: 10x faster than the pure-Python one.
        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise NovaError(f"{what} {path} is not valid YAML ({exc})", "fix the YAML syntax") from exc
    return raw, data


def check_entries(data: Any, schema: Mapping[str, Any], path: Path, what: str, fix: str) -> None:
    """``data`` against ``schema``; a violation names where, and the entry by its name when
    it lies inside ``entries`` (what the vocabulary and the corpus hold)."""
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "top level"
        if len(exc.absolute_path) >= 2 and exc.absolute_path[0] == "entries":
            item = data["entries"][exc.absolute_path[1]]
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                where += f" ({item['name']!r})"
        raise NovaError(f"malformed {what} entry in {path} at {where}: {exc.message}", fix) from exc
