"""Reading YAML the project takes from users (config files, catalog entries, audit sheets)
and its own data files (vocabulary, corpus): one-line errors that name the file, and schema
violations that name the entry.

:func:`load_yaml` is stricter than ``yaml.safe_load`` where a file can hurt or mislead: a
key given twice in one mapping (YAML keeps the last silently; keys compared as read, so
``yes`` and ``true`` are one), a NaN or an infinity however spelled, a value that cannot
be read (an integer of over 4,300 digits), and aliases that expand the document by more
than :data:`MAX_ALIAS_EXPANSION` values (an "alias bomb" of a few hundred bytes expands to
10^9 values and hangs whatever walks it) are refused, each in one line naming the file and
line. :func:`check_loaded` applies
the same checks to data another reader loaded (Snakemake reads the config files).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from novabench.errors import NovaError

# How many values aliases may add to a document, beyond those written out in it.
MAX_ALIAS_EXPANSION = 10_000
# The C loader when libyaml is present: 10x faster than the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Scalars whose construction can fail or give a non-finite number: checked before it.
_CHECKED_TAGS = tuple(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "timestamp"))
_ALIAS_FIX = "write the repeated values out, or use fewer aliases"


def read_yaml(path: Path, what: str, unreadable_fix: str) -> tuple[bytes, Any]:
    """A data file's bytes (for its hash) and its parsed YAML; ``what`` names the file in
    the one-line errors ("the retrieval corpus")."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise NovaError(f"cannot read {what} {path} ({exc.strerror})", unreadable_fix) from exc
    return raw, load_yaml(raw, f"{what} {path}")


def load_yaml(text: str | bytes, where: str) -> Any:
    """Parse one YAML document as ``yaml.safe_load`` does, refusing duplicate keys, NaN
    and infinities, and alias bombs; ``where`` names the file in the one-line errors."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _YamlCheck(where, loader).check(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise NovaError(f"{where} is not valid YAML ({exc})", "fix the YAML syntax") from None
    except RecursionError:
        raise NovaError(f"{where} is nested too deeply", "flatten the YAML") from None
    finally:
        loader.dispose()


class _YamlCheck:
    """One walk of a composed node graph: duplicate keys, non-finite numbers, and how many
    values the aliases add (a node reached twice is an alias; its size counts again)."""

    def __init__(self, where: str, loader: Any):
        self.where = where
        self.loader = loader  # constructs keys and numbers as the document will hold them
        self.sizes: dict[int, int] = {}
        self.open: set[int] = set()

    def check(self, root: yaml.Node) -> None:
        expanded = self.size(root)
        if expanded - len(self.sizes) > MAX_ALIAS_EXPANSION:
            raise NovaError(
                f"{self.where}: its aliases expand it by more than {MAX_ALIAS_EXPANSION:,} values",
                _ALIAS_FIX,
            )

    def size(self, node: yaml.Node) -> int:
        """The number of values under ``node`` with every alias written out."""
        key = id(node)
        if key in self.sizes:
            return self.sizes[key]
        if key in self.open:
            raise NovaError(f"{self.where}:{_line(node)}: an alias refers to itself", _ALIAS_FIX)
        self.open.add(key)
        if isinstance(node, yaml.MappingNode):
            self.duplicate_keys(node)
            total = 1 + sum(self.size(k) + self.size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(self.size(item) for item in node.value)
        else:
            if node.tag in _CHECKED_TAGS:
                self.checked_scalar(node)
            total = 1
        self.open.discard(key)
        self.sizes[key] = total
        return total

    def checked_scalar(self, node: yaml.ScalarNode) -> None:
        """Refuse a number that is not finite however it is spelled (``.nan``, ``!!float
        nan``, ``1e400``), and a value that cannot be constructed, in one line."""
        value = self.construct(node)
        if isinstance(value, float) and not math.isfinite(value):
            raise NovaError(
                f"{self.where}:{_line(node)}: {node.value} is not a finite number",
                "give a number",
            )

    def construct(self, node: yaml.ScalarNode) -> Any:
        try:
            return self.loader.construct_object(node)
        except ValueError:  # Python refuses to read integers of over 4,300 digits
            limit = sys.get_int_max_str_digits()
            shown = node.value
            if len(shown) > 20:  # a value of 5,000 digits would fill the screen
                shown = f"{shown[:20]}... ({len(shown):,} characters)"
            raise NovaError(
                f"{self.where}:{_line(node)}: {shown} is not a value that can be read",
                f"give a number of at most {limit:,} digits"
                if len(node.value) > limit
                else "give a value of its type",
            ) from None

    def duplicate_keys(self, node: yaml.MappingNode) -> None:
        """Keys compared as constructed: ``yes`` and ``true``, ``1`` and ``0x1`` are one."""
        seen: set[Any] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                continue
            value = self.construct(key)
            if value in seen:
                raise NovaError(
                    f"{self.where}:{_line(key)}: the key {key.value!r} is given twice in "
                    "one mapping",
                    "keep one (YAML would silently use the last)",
                )
            seen.add(value)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def check_loaded(data: Any, where: str) -> None:
    """Refuse ``data`` (loaded by another reader) as :func:`load_yaml` would: values it
    holds more than once (YAML aliases) that add more than :data:`MAX_ALIAS_EXPANSION`
    values, and NaN or infinities anywhere; one line naming ``where`` and the key."""
    walk = _DataWalk(where)
    try:
        expanded = walk.size(data, ())
    except RecursionError:
        raise NovaError(f"{where} is nested too deeply", "flatten it") from None
    if expanded - walk.unique > MAX_ALIAS_EXPANSION:
        raise NovaError(
            f"{where}: its aliases expand it by more than {MAX_ALIAS_EXPANSION:,} values",
            _ALIAS_FIX,
        )


class _DataWalk:
    """Sizes of loaded containers with shared ones counted at every place they appear
    (memoized, so a bomb costs its unique size), and the unique size beside them."""

    def __init__(self, where: str):
        self.where = where
        self.sizes: dict[int, int] = {}
        self.open: set[int] = set()
        self.unique = 0

    def size(self, value: Any, path: tuple[Any, ...]) -> int:
        key = id(value)
        if key in self.sizes:
            return self.sizes[key]
        if key in self.open:
            raise NovaError(f"{self.where}: {_dotted(path)} contains itself", _ALIAS_FIX)
        self.open.add(key)
        self.unique += 1
        items = value.items() if isinstance(value, dict) else enumerate(value)
        total = 1
        for name, child in items:
            if isinstance(child, dict | list):
                total += self.size(child, (*path, name))
                continue
            self.unique += 1
            total += 1
            if isinstance(child, float) and not math.isfinite(child):
                raise NovaError(
                    f"{self.where}: {_dotted((*path, name))} is {child}, not a finite number",
                    "give a number",
                )
        self.open.discard(key)
        self.sizes[key] = total
        return total


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(map(str, path)) or "(top level)"


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
