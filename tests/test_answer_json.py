"""JSON inside an answer (answer_json): single-quoted strings requoted in linear time."""

from __future__ import annotations

import pytest

from adversarial_text import SHAPES, assert_linear_time
from novabench.answer_json import json_spans, load_lenient


@pytest.mark.parametrize(
    "span, value",
    [
        (
            "{'a': 'Wilson's disease', 'b': ['x', 'y',],}",
            {"a": "Wilson's disease", "b": ["x", "y"]},
        ),
        ("{,'a,'a,'b'}", None),  # not JSON and not a Python literal
        ("['a', \"b\"]", ["a", "b"]),
    ],
)
def test_single_quoted_strings_are_requoted(span, value):
    assert load_lenient(span) == value


@pytest.mark.parametrize("shape", SHAPES)
def test_a_megabyte_of_adversarial_text_is_read_in_linear_time(shape):
    assert_linear_time(load_lenient, shape)
    assert_linear_time(lambda text: [load_lenient(span) for span in json_spans(text)], shape)
