"""JSON inside a model's answer: fences, prose, single quotes, trailing commas, smart quotes.

Language models wrap the JSON a prompt asks for in prose and Markdown, and write it with
Python quoting or trailing commas. The diagnosis parser and the LLM judge read answers
with these two functions. Written by hand: json5-style parsers accept more syntax but do
not find the object inside prose, and none bounds the work on pathological text. Every
step is one linear pass (tests/test_answer_json.py times 1 MB adversarial inputs).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

# At most this many candidate spans are read from one answer.
MAX_SPANS = 32
# Deeper JSON is not an answer, and the readers that use these values recurse per level.
MAX_DEPTH = 32


def structural_brackets(text: str) -> Iterator[tuple[int, str]]:
    """Each bracket outside quoted strings, with its position, in one linear pass.

    JSON and Python strings cannot hold a raw newline, so a newline ends any open quote: a
    stray quote in prose then spoils one line at most.
    """
    quote, escaped = "", False
    for j, ch in enumerate(text):
        if ch == "\n":
            quote, escaped = "", False
        elif quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch == '"' or (ch == "'" and not (j > 0 and text[j - 1].isalnum())):
            quote = ch  # an apostrophe inside a word ("Wilson's") opens no string
        elif ch in "{}[]":
            yield j, ch


def closes(stack: list[tuple[str, int]], ch: str) -> bool:
    """Whether closing bracket ``ch`` closes the innermost open one on ``stack``."""
    return bool(stack) and stack[-1][0] == "[{"["]}".index(ch)]


def json_spans(text: str) -> list[str]:
    """Outermost balanced {...} / [...] substrings, in order, in one linear pass
    (brackets inside quoted strings do not count: :func:`structural_brackets`)."""
    pairs: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    for j, ch in structural_brackets(text):
        if ch in "{[":
            stack.append((ch, j))
        elif closes(stack, ch):
            pairs.append((stack.pop()[1], j))
    spans: list[str] = []
    last_end = -1
    for start, end in sorted(pairs):
        if start > last_end:  # skip pairs nested in an earlier span
            spans.append(text[start : end + 1])
            last_end = end
            if len(spans) == MAX_SPANS:
                break
    return spans


def _closing_quotes(span: str) -> list[int]:
    """For each position, the first quote at or after it that can close a 'string': one
    followed by optional whitespace and ``,:}]`` (len(span) where there is none)."""
    closing = [len(span)] * (len(span) + 1)
    next_solid = len(span)  # the first non-whitespace position after the current one
    for i in range(len(span) - 1, -1, -1):
        closes_here = span[i] == "'" and next_solid < len(span) and span[next_solid] in ",:}]"
        closing[i] = i if closes_here else closing[i + 1]
        if not span[i].isspace():
            next_solid = i
    return closing


def _single_to_double_quotes(span: str) -> str:
    """Requote 'strings' as JSON strings; an apostrophe inside one ("Wilson's") stays.

    A string opens with a quote after ``{[,:`` and optional whitespace and ends at the
    first quote that can close it. One pass with the closing quotes found beforehand,
    where a lazy regular expression rescanned the rest of the span from every opening
    quote (quadratic on ``{,'a,'a,...``).
    """
    closing = _closing_quotes(span)
    parts: list[str] = []
    done = i = 0
    while i < len(span):
        if span[i] in "{[,:":
            opening = i + 1
            while opening < len(span) and span[opening].isspace():
                opening += 1
            if opening < len(span) and span[opening] == "'":
                end = closing[opening + 1]
                if end < len(span):
                    parts += [span[done:opening], json.dumps(span[opening + 1 : end])]
                    done = i = end + 1
                    continue
        i += 1
    return "".join([*parts, span[done:]])


def load_lenient(span: str) -> Any:
    """json, then json with trailing commas and smart quotes fixed, then Python literals."""
    attempts = [span]
    fixed = re.sub(r",\s*([}\]])", r"\1", span.translate(str.maketrans("“”‘’", "\"\"''")))
    attempts += [fixed, _single_to_double_quotes(fixed)]
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except (ValueError, RecursionError):
            continue
        return value if _readable(value) else None
    # Python-literal syntax covers single quotes and trailing commas; map JSON constants.
    literal = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", fixed))
    literal = re.sub(r"\bnull\b", "None", literal)
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if _readable(value) else None


def _readable(value: Any) -> bool:
    """At most MAX_DEPTH deep, and no integer too long to print (a 5000-digit hex literal)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, int):
            try:
                str(item)
            except ValueError:  # beyond the interpreter's limit on integer digits
                return False
        elif isinstance(item, dict | list | tuple | set | frozenset):
            if depth == MAX_DEPTH:
                return False
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True
