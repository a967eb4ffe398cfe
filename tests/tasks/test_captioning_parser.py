"""Captioning's parser (tasks/captioning/parser.py): the answer's words, in linear time."""

from __future__ import annotations

import pytest

from adversarial_text import SHAPES, assert_linear_time
from novabench.tasks.captioning.parser import parse_caption


@pytest.mark.parametrize("shape", SHAPES)
def test_a_megabyte_of_adversarial_text_is_read_in_linear_time(shape):
    assert_linear_time(parse_caption, shape)
