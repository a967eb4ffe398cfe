"""The installable package: declared dependencies agree with the pins, and the wheel works."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pinned_versions() -> dict[str, Version]:
    """Package -> its exact pin in requirements.txt (the one source of versions)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"requirements.txt must pin exactly: {line}"
            pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for the core and every extra of pyproject.toml."""
    found = [("dependencies", Requirement(r)) for r in PROJECT["dependencies"]]
    for extra, requirements in PROJECT["optional-dependencies"].items():
        found += [(f"extra {extra}", Requirement(r)) for r in requirements]
    return found


def test_every_declared_dependency_is_pinned_inside_its_range():
    pins = pinned_versions()
    for where, requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{where}: {requirement.name} is not pinned in requirements.txt"
        assert requirement.specifier.contains(pins[name]), (
            f"{where}: the pin {name}=={pins[name]} is outside {requirement}"
        )
        lower = [s for s in requirement.specifier if s.operator == ">="]
        assert [Version(s.version) for s in lower] == [pins[name]], (
            f"{where}: {requirement} must start at the pinned {pins[name]}"
        )


def test_every_pin_is_declared_somewhere():
    names = {canonicalize_name(r.name) for _, r in declared()}
    assert set(pinned_versions()) <= names
