"""Adversarial answers of each known shape, and a check that a reader's time is linear.

Each shape repeats one unit between a prefix and a suffix, the shapes that made a reader
quadratic once (``{,'a,'a,...}``: a lazy regular expression rescanning the rest of the
text from every quote; many boxes on one line: a search back to the line's start per box)
and their neighbours. :func:`assert_linear_time` reads a 100 KB and a 1 MB input of a shape:
linear time gives a ratio near 10, quadratic near 100.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SHAPES: dict[str, tuple[str, str, str]] = {
    "single quotes after commas": ("{,", "'a,", "}"),
    "an open list of single quotes": ('{"most_likely_diagnosis": "X", "others": [', "'a,", ""),
    "numbered items": ("", "1. ", ""),
    "bold marks": ("", "**", ""),
    "bullets": ("", "\n- a", ""),
    "spaces after a label": ("Diagnosis", " ", "x"),
    "parentheses": ("", "(", ""),
    "brackets": ("", "[", ""),
    "braces": ("", "{", ""),
    "double quotes": ("", '"', ""),
    "quoted lines": ("", '"a\n', ""),
    "fences": ("", "```", ""),
    "a series after a label": ("Differential: ", "a, ", ""),
    "JSON constants": ("{", "true,", "}"),
    "trailing commas": ("{", ",  ", "}"),
    "object keys": ("{", "'a': 1, ", "}"),
    "boxes on one line": ("", "[1,2,30,40],", ""),
    "points on one line": ("", "(1, 2), ", ""),
    "unfinished boxes": ("", "[1, 2, 3, ", ""),
    "location tokens": ("", "<loc0001>", ""),
    "labels before a box": ("", "a: ", "[1, 2, 3, 4]"),
    "a long keyword list": ('{"label": "abnormal", "findings": [', '"no a b",', "]}"),
    "a long keyword string": ('{"label": "abnormal", "findings": "', "no a, ", '"}'),
}


def adversarial(shape: str, size: int) -> str:
    prefix, unit, suffix = SHAPES[shape]
    return prefix + unit * (size // len(unit)) + suffix


def _seconds(read: Callable[[str], Any], text: str) -> float:
    started = time.perf_counter()
    read(text)
    return time.perf_counter() - started


def assert_linear_time(read: Callable[[str], Any], shape: str) -> None:
    """``read`` takes a 1 MB input of ``shape`` in time linear in its size: under half a
    second, or at most 30 times its time on 100 KB (linear gives ~10-20, quadratic ~100).
    The ratio is taken from 10 ms up, below which the clock and the machine's load decide
    it."""
    small = _seconds(read, adversarial(shape, 100_000))
    assert small < 2.0, (shape, small)  # quadratic: the 1 MB input would take minutes
    large = _seconds(read, adversarial(shape, 1_000_000))
    for _ in range(2):  # again while over: a busy machine slows one run, not every one
        if large < 0.5 or large < 30 * max(small, 0.01):
            break
        large = min(large, _seconds(read, adversarial(shape, 1_000_000)))
    assert large < 0.5 or large < 30 * max(small, 0.01), (shape, small, large)
    assert large < 20.0, (shape, large)
