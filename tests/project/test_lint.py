"""The project's own gates: Snakemake lint, snakefmt and ruff are clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import ROOT

BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_snakemake_lint_prints_no_warning():
    result = run(str(BIN / "snakemake"), "--lint")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Lints for" not in output and "warning" not in output.lower(), output


def test_snakefmt_check_passes():
    result = run(str(BIN / "snakefmt"), "--check", "Snakefile", "workflow")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_and_format_pass():
    check = run(str(BIN / "ruff"), "check", ".")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = run(str(BIN / "ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
