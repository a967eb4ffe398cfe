"""What code and data a job runs, as one fingerprint: a job re-runs when either changes.

Snakemake's ``code`` trigger sees a rule's entry script only, not the package modules it
imports, so every job carries this fingerprint as a parameter instead (Snakemake re-runs
a job whose parameters changed). Its files are found, never listed by hand:

- modules from the static import graph: every ``import`` statement, at module level and
  inside functions, read with :mod:`ast` (no code is run);
- data files (vocabularies, knowledge base, prompts) from the file names a module writes
  as string literals; a test checks that every data file of the package is named so.

A module counts by what it does, not how it is written: its hash is that of its syntax tree
without docstrings (module, class and function) and, as the tree never holds them, without
comments (:func:`syntax_digest`); editing either re-runs nothing and keeps every judge's
identity. Data files count byte for byte.

Plug-ins are loaded by name (model adapters by kind, judge kinds, each task's stages), so
the graph holds none of them and a job names the ones it runs as further roots: editing
the classical baseline re-runs its predictions only, editing a task's metrics re-scores
that task only. Paths are relative to the package's parent folder, so a moved checkout
re-runs nothing. Third-party packages are pinned by the environments, not hashed here.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

# scripts/: the package and the rules' entry scripts (top-level modules there).
SCRIPTS = Path(__file__).resolve().parents[1]
PACKAGE = "novabench"
_NOT_DATA = {".py", ".pyc"}
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
T = TypeVar("T")


@dataclass(frozen=True)
class _Source:
    imports: frozenset[str]  # modules of the package this file imports
    names: frozenset[str]  # string literals, some of which name data files
    digest: str  # syntax_digest of the module


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstring of its module, classes and functions (in place):
    text for readers, which no job's output depends on."""
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:]
    return tree


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def canonical_dump(node: Any) -> str:
    """``ast.dump(node, include_attributes=False)`` without the fields left empty (None,
    []). Attributes (line and column numbers) stay out, or a comment line added above
    would shift every node after it; empty fields stay out as Python versions differ in
    them (3.12 added ``type_params``, 3.13's dump omits empty fields), and a job may
    compute a judge's identity under another Python than the one that recorded it."""
    if isinstance(node, ast.AST):
        fields = (
            f"{name}={canonical_dump(value)}"
            for name, value in ast.iter_fields(node)
            if value is not None and value != []
        )
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(canonical_dump(item) for item in node)}]"
    return repr(node)


def syntax_digest(tree: ast.AST) -> str:
    """sha256 of a parsed module as it runs: docstrings and comments do not count."""
    return hashlib.sha256(canonical_dump(strip_docstrings(tree)).encode()).hexdigest()


class CodeGraph:
    """The import graph and data files of the package under ``root`` (``scripts/``)."""

    def __init__(self, root: Path = SCRIPTS):
        self.root = Path(root)
        self._sources: dict[Path, tuple[tuple[int, int], _Source]] = {}
        self._hashes: dict[Path, tuple[tuple[int, int], str]] = {}
        self._data: dict[str, list[Path]] | None = None

    # --- resolution ----------------------------------------------------------------------

    def module_file(self, name: str) -> Path | None:
        """The file of module ``name`` under the root (None: not ours, e.g. third-party)."""
        base = self.root.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def _required_file(self, name: str) -> Path:
        path = self.module_file(name)
        if path is None:
            raise ValueError(f"no module {name!r} under {self.root}")
        return path

    def _module_name(self, path: Path) -> str:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def data_files(self) -> dict[str, list[Path]]:
        """The package's data files by file name."""
        if self._data is None:
            found: dict[str, list[Path]] = {}
            for path in sorted((self.root / PACKAGE).rglob("*")):
                if (
                    path.is_file()
                    and path.suffix not in _NOT_DATA
                    and "__pycache__" not in path.parts
                ):
                    found.setdefault(path.name, []).append(path)
            self._data = found
        return self._data

    def _source(self, path: Path) -> _Source:
        return _cached(self._sources, path, self._parse)

    def _parse(self, path: Path) -> _Source:
        # Docstrings out first: a file name or import written in one is no edge either.
        tree = strip_docstrings(ast.parse(path.read_bytes(), filename=str(path)))
        name = self._module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        wanted: set[str] = set()
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node.module, node.level, package)
                if base is None:
                    continue
                wanted.add(base)
                wanted.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
        imports = set()
        for module in wanted:
            parts = module.split(".")
            # Importing a.b.c runs a/__init__ and a/b/__init__ too.
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if parts[0] == PACKAGE and self.module_file(prefix) is not None:
                    imports.add(prefix)
        return _Source(frozenset(imports), frozenset(names), syntax_digest(tree))

    def modules(self) -> list[str]:
        """Every module of the package, by name."""
        return sorted(
            self._module_name(path)
            for path in (self.root / PACKAGE).rglob("*.py")
            if "__pycache__" not in path.parts
        )

    def imports(self, name: str) -> frozenset[str]:
        """The package's modules that module ``name`` imports anywhere in its code."""
        return self._source(self._required_file(name)).imports - {name}

    # --- closure and fingerprint ---------------------------------------------------------

    def files(self, roots: Iterable[str]) -> list[Path]:
        """Every module reachable from ``roots`` (module names, e.g. ``score`` for
        ``scripts/score.py`` or ``novabench.tasks.localization``) and every package data
        file those modules name, sorted."""
        seen: set[Path] = set()
        data: set[Path] = set()
        pending = [self._required_file(root) for root in roots]
        known = self.data_files()
        while pending:
            path = pending.pop()
            if path in seen:
                continue
            seen.add(path)
            source = self._source(path)
            pending.extend(self.module_file(name) for name in source.imports)
            for literal in source.names:
                # A literal may be a bare name ("lexicon.yaml") or end in one.
                data.update(known.get(literal.rpartition("/")[2], ()))
        return sorted(seen | data)

    def file_hash(self, path: Path) -> str:
        """A module's :func:`syntax_digest`; a data file's sha256 of its bytes."""
        if path.suffix == ".py":
            return self._source(path).digest
        return _cached(self._hashes, path, lambda p: hashlib.sha256(p.read_bytes()).hexdigest())

    def listing(self, roots: Iterable[str]) -> dict[str, str]:
        """``{path relative to the root: file_hash}`` of :meth:`files`."""
        return {
            path.relative_to(self.root).as_posix(): self.file_hash(path)
            for path in self.files(roots)
        }

    def fingerprint(self, roots: Iterable[str]) -> str:
        """One short hex string for the code and data behind ``roots``."""
        text = "".join(f"{name}\t{digest}\n" for name, digest in self.listing(roots).items())
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cached(cache: dict[Path, tuple[tuple[int, int], T]], path: Path, compute) -> T:
    """``compute(path)``, again only once the file's time or size changed."""
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    hit = cache.get(path)
    if hit is None or hit[0] != key:
        hit = cache[path] = (key, compute(path))
    return hit[1]


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """The absolute name of ``from <level dots><module> import ...`` inside ``package``."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) or None


@cache
def code_graph() -> CodeGraph:
    """The graph of this installation (cached per process; files are re-read on change)."""
    return CodeGraph()


def code_fingerprint(*roots: str) -> str:
    return code_graph().fingerprint(roots)
