"""The diagnosis matcher's verdict snapshot: every validation pair, its verdict and rule.

One JSON line per pair of every diagnosis validation set (``VALIDATION_SETS``), in file
order: the set, the pair's line and id, prediction, reference, the configured matcher's
verdict (match, no_match or undecided) and the rule that decided it. The committed
snapshot is a test's expected output, so a change to the matcher or its tables shows
exactly which verdicts it moves; it lives with the tests (the tool names it), not with
the package. Only the texts are read; the hand labels play no part in building or
running the matcher.

    python scripts/tools/judge_snapshots.py diagnosis          # rewrite the snapshot
    python scripts/tools/judge_snapshots.py diagnosis --check  # list the moved verdicts
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from novabench.errors import NovaError
from novabench.judges import validation

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config" / "config.yaml"
REWRITE = "python scripts/tools/judge_snapshots.py diagnosis"
FIELDS = ("set", "line", "id", "prediction", "reference", "verdict", "rule")


def configured_judge(
    task: str, config_path: Path = CONFIG, settings: Mapping[str, Any] | None = None
) -> Any:
    """The pipeline's judge of ``task`` (``tasks.<task>.judge`` of the config), its
    settings updated with ``settings``."""
    from novabench.judges.base import make_judge

    try:
        config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
        name = config["tasks"][task]["judge"]
        judge = dict(config["judges"][name])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise NovaError(
            f"cannot find the {task} judge of {config_path} ({type(exc).__name__}: {exc})",
            f"give the config tasks.{task}.judge naming an entry of judges:",
        ) from None
    merged = {**(judge.get("settings") or {}), **(settings or {})}
    return make_judge({**judge, "name": name, "settings": merged}, task)


def configured_matcher(config_path: Path = CONFIG) -> Any:
    """The pipeline's diagnosis judge, without its embedding fallback: the snapshot
    records what the rules decide."""
    return configured_judge("diagnosis", config_path, {"embedding_fallback": False})


def snapshot_rows(
    judge: Any, folder: Path | None = None, keys: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One row per pair of each diagnosis validation set in ``folder`` (those of ``keys``
    only, when given), in file order."""
    folder = validation.validation_folder(folder)
    rows = []
    for vset in validation.VALIDATION_SETS:
        # Name pairs only: raw answers are read first, and their figures are recorded.
        if vset.measure is not validation.MEASURES["match"]:
            continue
        if vset.task != "diagnosis" or (keys is not None and vset.key not in keys):
            continue
        if not (folder / vset.filename).is_file():  # a set not (yet) in this checkout
            continue
        for line, pair in validation.read_numbered_pairs(folder / vset.filename, vset.fields):
            decision = judge.explain(pair["prediction"], pair["reference"])
            rows.append(
                {
                    "set": vset.key,
                    "line": line,
                    "id": pair["id"],
                    "prediction": pair["prediction"],
                    "reference": pair["reference"],
                    "verdict": _three_valued(decision),
                    "rule": decision.rule,
                }
            )
    return rows


def render(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps({k: r[k] for k in FIELDS}, ensure_ascii=False) + "\n" for r in rows)


def read_snapshot(path: Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise NovaError(f"cannot read the verdict snapshot {path} ({exc})", REWRITE) from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _three_valued(decision: Any) -> str:
    """match / no_match / undecided; a judge without three values gives two."""
    verdict = getattr(decision, "verdict", None)
    return verdict or ("match" if decision.matched else "no_match")


def _verdict(value: bool | str) -> str:
    """As the report writes it; a snapshot written before verdicts had three values
    holds True / False."""
    if isinstance(value, bool):
        return "match" if value else "no match"
    return value.replace("_", " ")


EDITED = "the pair itself changed: the validation set was edited"


def paired_rows(
    expected: Sequence[Mapping[str, Any]],
    actual: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
) -> Iterator[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
    """("set:line", old row, new row) per pair of either snapshot, in order; both rows None
    when the pair's ``texts`` differ or one side lacks it (a validation set was edited)."""
    old = {(r["set"], r["line"]): r for r in expected}
    new = {(r["set"], r["line"]): r for r in actual}
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        edited = a is None or b is None or [a[t] for t in texts] != [b[t] for t in texts]
        yield f"{key[0]}:{key[1]}", (None if edited else a), (None if edited else b)


def moved(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]
) -> list[tuple[str, bool]]:
    """(readable line, verdict changed) per pair whose verdict or deciding rule differs, or
    that one side lacks (a validation set was edited); empty when the two agree."""
    out = []
    for where, a, b in paired_rows(expected, actual, ("prediction", "reference")):
        if a is None or b is None:
            out.append((f"{where} {EDITED}", True))
            continue
        if (_verdict(a["verdict"]), a["rule"]) == (_verdict(b["verdict"]), b["rule"]):
            continue
        flipped = _verdict(a["verdict"]) != _verdict(b["verdict"])
        verdict = _verdict(a["verdict"])
        if flipped:
            verdict += f" -> {_verdict(b['verdict'])}"
        rule = a["rule"] if a["rule"] == b["rule"] else f"{a['rule']} -> {b['rule']}"
        pair = f"{b['id']} {b['prediction']!r} vs {b['reference']!r}"
        out.append((f"{where} {pair}: {verdict}; rule {rule}", flipped))
    return out


def report(moves: Sequence[tuple[str, bool]]) -> str:
    """The message of a mismatch: how many moved, each of them, and the rewrite command."""
    flips = sum(flipped for _, flipped in moves)
    return (
        f"{len(moves)} pairs of the verdict snapshot moved, {flips} of them to the other verdict:\n"
        + "\n".join(f"  {line}" for line, _ in moves)
        + f"\nIf every move is intended, rewrite the snapshot: {REWRITE}"
    )
