"""The project's own gates: Snakemake lint, snakefmt and ruff are clean, and no function of
the package is over 60 lines."""

from __future__ import annotations

import ast
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


# The house rule on function size (ruff has no rule that counts lines).
MAX_FUNCTION_LINES = 60


def test_no_function_of_the_package_is_over_60_lines():
    long = []
    for path in sorted((ROOT / "scripts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines}")
    assert not long, long
