"""Tests for the localization parser (tasks/localization/boxes.py): reading each model's box
convention into pixel boxes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adversarial_text import SHAPES, assert_linear_time
from novabench.answer_formats import BOX_FORMATS, smart_resize
from novabench.errors import ConfigError, NovaError
from novabench.tasks.localization.boxes import (
    STATUSES,
    Box,
    ParsedBoxes,
    from_dict,
    parse_boxes,
    to_dict,
)

FENCE = "```"


def xywh(parsed: ParsedBoxes) -> list[tuple[float, float, float, float]]:
    return [(b.x, b.y, b.width, b.height) for b in parsed.boxes]


def assert_boxes(parsed: ParsedBoxes, expected: list[tuple[float, float, float, float]]) -> None:
    assert parsed.status == "ok", parsed
    got = xywh(parsed)
    assert len(got) == len(expected)
    for box, want in zip(got, expected, strict=True):
        assert box == pytest.approx(want, abs=1e-9)


# --- hand-written cases, one group per convention ---------------------------------------


def test_gemini_json_mode_real_looking_answer():
    text = f'{FENCE}json\n[\n  {{"box_2d": [385, 541, 529, 673], "label": "lesion"}}\n]\n{FENCE}'
    parsed = parse_boxes(text, "gemini_yxyx_1000")
    # [ymin, xmin, ymax, xmax] / 1000 * 480: y 184.8..253.92, x 259.68..323.04
    assert_boxes(parsed, [(259.68, 184.8, 63.36, 69.12)])
    assert parsed.boxes[0].label == "lesion"
    assert parsed.boxes[0].score is None


def test_gemini_label_lines_keep_order_and_labels():
    text = "Here are the findings:\nmass: [500, 100, 600, 300]\n- edema: [100, 500, 250, 750]\n"
    parsed = parse_boxes(text, "gemini_yxyx_1000")
    # first box: x 48..144, y 240..288; second: x 240..360, y 48..120
    assert_boxes(parsed, [(48, 240, 96, 48), (240, 48, 120, 72)])
    assert [b.label for b in parsed.boxes] == ["mass", "edema"]


@pytest.mark.parametrize(
    "text",
    [
        "No target",
        "no target.",
        "There is no abnormality in this image.",
        "No abnormalities detected.",
        "No significant findings.",
        "None",
        "[]",
        f"{FENCE}json\n[]\n{FENCE}",
        "null",
    ],
)
def test_no_finding_answers(text):
    parsed = parse_boxes(text, "gemini_yxyx_1000")
    assert parsed == ParsedBoxes("no_finding", (), 0, None)


def test_boxes_win_over_no_finding_phrase():
    text = "No abnormality in the left hemisphere; lesion: [100, 100, 200, 200]"
    assert_boxes(parse_boxes(text, "gemini_yxyx_1000"), [(48, 48, 48, 48)])


def test_qwen2vl_box_tokens():
    text = (
        "<|object_ref_start|>the abnormal region<|object_ref_end|>"
        "<|box_start|>(512,370),(668,521)<|box_end|>"
    )
    parsed = parse_boxes(text, "xyxy_1000")
    # x 245.76..320.64, y 177.6..250.08
    assert_boxes(parsed, [(245.76, 177.6, 74.88, 72.48)])
    assert parsed.boxes[0].label == "the abnormal region"


def test_qwen2vl_box_tokens_stripped_by_the_tokenizer():
    # skip_special_tokens=True leaves only the points
    parsed = parse_boxes("the abnormal region(512,370),(668,521)", "xyxy_1000")
    assert_boxes(parsed, [(245.76, 177.6, 74.88, 72.48)])


def test_qwen3vl_json_in_thousandths():
    text = '[{"bbox_2d": [250, 500, 750, 1000], "label": "tumor"}]'
    assert_boxes(parse_boxes(text, "xyxy_1000"), [(120, 240, 240, 240)])


def test_qwen25_real_looking_answer_uses_processor_frame():
    text = (
        f"{FENCE}json\n[\n"
        '\t{"bbox_2d": [238, 119, 357, 238], "label": "abnormal hyperintensity"}\n'
        f"]\n{FENCE}"
    )
    parsed = parse_boxes(text, "qwen25_bbox_2d")
    # 480x480 is resized to 476x476, so pixels scale by 480/476
    s = 480 / 476
    assert_boxes(parsed, [(238 * s, 119 * s, 119 * s, 119 * s)])
    assert parsed.boxes[0].label == "abnormal hyperintensity"


def test_qwen25_explicit_resized_frame():
    text = '[{"bbox_2d": [100, 50, 300, 150]}]'
    parsed = parse_boxes(text, "qwen25_bbox_2d", resized_size=(800, 400))
    # x * 480/800 = 0.6, y * 480/400 = 1.2
    assert_boxes(parsed, [(60, 60, 120, 120)])


@pytest.mark.parametrize(
    ("height", "width", "expected"),
    [
        # 480/28 = 17.14 -> 17 * 28
        (480, 480, (476, 476)),
        (512, 512, (504, 504)),
        # 1008 x 1988 exceeds 28*28*1280 = 1,003,520 pixels: beta = sqrt(2e6 / 1,003,520),
        # floor(1000 / beta / 28) = 25 -> 700, floor(2000 / beta / 28) = 50 -> 1400
        (1000, 2000, (700, 1400)),
        # 28 x 28 is under 56*56: beta = sqrt(3136 / 600), ceil(20 beta / 28) = 2 -> 56,
        # ceil(30 beta / 28) = 3 -> 84
        (20, 30, (56, 84)),
    ],
)
def test_smart_resize(height, width, expected):
    assert smart_resize(height, width) == expected


def test_pixel_xyxy_baseline_format_with_score():
    text = '[{"bbox_2d": [100, 120, 180, 200], "score": 0.83}, {"bbox_2d": [1, 2, 3, 4]}]'
    parsed = parse_boxes(text, "pixel_xyxy")
    assert_boxes(parsed, [(100, 120, 80, 80), (1, 2, 2, 2)])
    assert [b.score for b in parsed.boxes] == [0.83, None]


def test_pixel_xyxy_single_quotes_trailing_commas_swapped_corners_and_prose():
    text = (
        "Sure! Here is my answer:\n"
        "[{'box': [200, 40, 100, 10,], 'confidence': 0.4,}, {'bbox': [5, 5, 15, 25]},]\n"
        "Let me know if you need anything else."
    )
    parsed = parse_boxes(text, "pixel_xyxy")
    assert_boxes(parsed, [(100, 10, 100, 30), (5, 5, 10, 20)])
    assert [b.score for b in parsed.boxes] == [0.4, None]


def test_pixel_xyxy_bare_lists():
    parsed = parse_boxes("[[10, 20, 30, 40], [50.5, 60, 70, 80.25]]", "pixel_xyxy")
    assert_boxes(parsed, [(10, 20, 20, 20), (50.5, 60, 19.5, 20.25)])


def test_xyxy_01():
    parsed = parse_boxes('{"bbox_2d": [0.25, 0.5, 0.75, 1.0]}', "xyxy_01")
    assert_boxes(parsed, [(120, 240, 240, 240)])


def test_llava_xyxy_01_with_two_decimals():
    # LLaVA-1.5/NeXT/OneVision write 0-1 corners: 0.12 * 640 = 76.8, 0.35 * 480 = 168, ...
    parsed = parse_boxes("lesion: [0.12, 0.35, 0.56, 0.71]", "xyxy_01", image_size=(640, 480))
    assert_boxes(parsed, [(76.8, 168.0, 0.44 * 640, 0.36 * 480)])
    assert parsed.boxes[0].label == "lesion"


def test_paligemma_loc_tokens_are_ymin_xmin_ymax_xmax_in_1024_bins():
    text = "<loc0128><loc0256><loc0384><loc0512> lesion ; <loc0512><loc0000><loc1023><loc0064> mass"
    parsed = parse_boxes(text, "paligemma_loc", image_size=(640, 480))
    # first: y 128/1024*480 = 60 .. 384/1024*480 = 180, x 256/1024*640 = 160 .. 512/1024*640 = 320
    # second: y 240 .. 1023/1024*480 = 479.53125, x 0 .. 64/1024*640 = 40
    assert_boxes(parsed, [(160.0, 60.0, 160.0, 120.0), (0.0, 240.0, 40.0, 239.53125)])
    assert [b.label for b in parsed.boxes] == ["lesion", "mass"]


def test_paligemma_loc_reads_only_location_tokens():
    # Numbers are not PaliGemma's convention; swapped corners are reordered as elsewhere.
    assert parse_boxes("[100, 200, 300, 400]", "paligemma_loc").status == "parse_error"
    parsed = parse_boxes("<loc0384><loc0512><loc0128><loc0256>", "paligemma_loc")
    assert_boxes(parsed, [(120.0, 60.0, 120.0, 120.0)])
    assert parsed.boxes[0].label is None
    assert parse_boxes("no finding", "paligemma_loc").status == "no_finding"


def test_internvl_ref_and_box_tags_in_thousandths():
    # <ref>label</ref><box>[[x1, y1, x2, y2]]</box> in 0-1000: 250/1000*480 = 120, ...
    text = "<ref>ring-enhancing lesion</ref><box>[[250, 125, 500, 375]]</box>"
    parsed = parse_boxes(text, "xyxy_1000")
    assert_boxes(parsed, [(120.0, 60.0, 120.0, 120.0)])
    assert parsed.boxes[0].label == "ring-enhancing lesion"
    # The tokenizer drops the tags when they are special tokens.
    parsed = parse_boxes("ring-enhancing lesion[[250, 125, 500, 375]]", "xyxy_1000")
    assert_boxes(parsed, [(120.0, 60.0, 120.0, 120.0)])


def test_glm4v_begin_of_box_in_thousandths():
    text = "The lesion is at <|begin_of_box|>[100, 200, 300, 400]<|end_of_box|>."
    # x 48..144, y 96..192
    assert_boxes(parse_boxes(text, "xyxy_1000"), [(48.0, 96.0, 96.0, 96.0)])


def test_non_square_image():
    parsed = parse_boxes("[100, 200, 300, 400]", "xyxy_1000", image_size=(640, 480))
    # x * 0.64, y * 0.48
    assert_boxes(parsed, [(64, 96, 128, 96)])


def test_clipping_to_the_image():
    parsed = parse_boxes("[-10, -20, 500, 100]", "pixel_xyxy")
    assert_boxes(parsed, [(0, 0, 480, 100)])


def test_degenerate_and_non_finite_boxes_are_dropped_and_counted():
    text = "[10, 10, 10, 50] [600, 600, 700, 700] [1e999, 1, 2, 3] [1, 1, 5, 5]"
    parsed = parse_boxes(text, "pixel_xyxy")
    assert_boxes(parsed, [(1, 1, 4, 4)])
    assert parsed.dropped == 3


def test_all_boxes_dropped_is_ok_without_boxes():
    parsed = parse_boxes("[0, 0, 0, 0]", "xyxy_1000")
    assert parsed == ParsedBoxes("ok", (), 1, None)


@pytest.mark.parametrize("text", ["", "   \n\t", None])
def test_empty_answer_is_parse_error(text):
    parsed = parse_boxes(text, "pixel_xyxy")
    assert parsed.status == "parse_error"
    assert parsed.boxes == ()
    assert parsed.error


@pytest.mark.parametrize(
    "text",
    [
        "I cannot determine the location.",
        '[{"bbox_2d": [1, 2, 3]}]',  # three numbers are not a box
        "[1, 2, 3, 4, 5]",  # nor five
    ],
)
def test_unreadable_answers_are_parse_errors(text):
    parsed = parse_boxes(text, "pixel_xyxy")
    assert parsed.status == "parse_error"
    assert parsed.error


def test_bad_arguments_raise_config_errors():
    with pytest.raises(ConfigError, match="unknown box format"):
        parse_boxes("[1, 2, 3, 4]", "xywh")
    with pytest.raises(ConfigError, match="resized_size"):
        parse_boxes("[1, 2, 3, 4]", "pixel_xyxy", resized_size=(476, 476))
    with pytest.raises(ConfigError, match="image_size"):
        parse_boxes("[1, 2, 3, 4]", "pixel_xyxy", image_size=(0, 480))


def test_dict_round_trip_is_json_friendly():
    parsed = ParsedBoxes(
        "ok", (Box(1.5, 2.0, 3.0, 4.0, score=0.5, label="lesion"), Box(5, 6, 7, 8)), 2, None
    )
    record = json.loads(json.dumps(to_dict(parsed)))
    assert record["boxes"][0] == {
        "x": 1.5,
        "y": 2.0,
        "width": 3.0,
        "height": 4.0,
        "score": 0.5,
        "label": "lesion",
    }
    assert from_dict(record) == parsed
    failed = ParsedBoxes("parse_error", (), 0, "empty answer")
    assert from_dict(json.loads(json.dumps(to_dict(failed)))) == failed


@pytest.mark.parametrize(
    "record",
    [
        {"boxes": []},
        {"status": "ok", "boxes": [{"x": 1}]},
        {"status": "maybe", "boxes": []},
    ],
)
def test_from_dict_rejects_malformed_records(record):
    with pytest.raises(NovaError):
        from_dict(record)


# --- property-based tests ----------------------------------------------------------------

SIZE = 480
QWEN_FRAME = 476  # smart_resize(480, 480)


def encode(box: tuple[float, float, float, float], box_format: str) -> tuple[list, float]:
    """Write pixel corners in a convention, rounded as a model would; returns the numbers
    and the worst pixel error that rounding can introduce in one coordinate."""
    x1, y1, x2, y2 = box
    if box_format == "paligemma_loc":  # bins of 480/1024 pixels, y before x
        k = 1024 / SIZE
        return [min(round(v * k), 1023) for v in (y1, x1, y2, x2)], 0.5 / k + 1 / k
    if box_format in ("gemini_yxyx_1000", "xyxy_1000"):
        k = 1000 / SIZE
        nums = [round(v * k) for v in (x1, y1, x2, y2)]
        if box_format == "gemini_yxyx_1000":
            nums = [nums[1], nums[0], nums[3], nums[2]]
        return nums, 0.5 / k
    if box_format == "qwen25_bbox_2d":
        k = QWEN_FRAME / SIZE
        return [round(v * k) for v in (x1, y1, x2, y2)], 0.5 / k
    if box_format == "xyxy_01":
        return [round(v / SIZE, 4) for v in (x1, y1, x2, y2)], 0.00005 * SIZE
    return [round(v, 2) for v in (x1, y1, x2, y2)], 0.005


def write(nums: list, box_format: str, template: str = "{nums}") -> str:
    """One box in a convention's written form (PaliGemma: location tokens and a label)."""
    if box_format == "paligemma_loc":
        return "".join(f"<loc{n:04d}>" for n in nums) + " lesion"
    return template.format(nums=json.dumps(nums), fence=FENCE)


TEMPLATES = (
    "{nums}",
    '[{{"bbox_2d": {nums}, "label": "lesion"}}]',
    "{fence}json\n[\n  {{'box_2d': {nums}, 'label': 'mass',}},\n]\n{fence}",
    "The abnormal region is located at {nums}. It is hyperintense.",
    "lesion: {nums}",
)


@st.composite
def pixel_boxes(draw):
    x1 = draw(st.floats(0, SIZE - 4))
    y1 = draw(st.floats(0, SIZE - 4))
    x2 = draw(st.floats(x1 + 3, SIZE))
    y2 = draw(st.floats(y1 + 3, SIZE))
    return (x1, y1, x2, y2)


@settings(max_examples=300, deadline=None)
@given(
    box=pixel_boxes(),
    box_format=st.sampled_from(BOX_FORMATS),
    template=st.sampled_from(TEMPLATES),
    swap=st.booleans(),
)
def test_round_trip_in_every_convention(box, box_format, template, swap):
    nums, tolerance = encode(box, box_format)
    if swap:  # corners written the wrong way round are reordered
        nums = nums[2:] + nums[:2]
    text = write(nums, box_format, template)
    parsed = parse_boxes(text, box_format)
    assert parsed.status == "ok", (text, parsed)
    assert len(parsed.boxes) == 1 and parsed.dropped == 0
    got = parsed.boxes[0]
    x1, y1, x2, y2 = box
    tol = tolerance + 1e-9
    assert got.x == pytest.approx(x1, abs=tol)
    assert got.y == pytest.approx(y1, abs=tol)
    assert got.x + got.width == pytest.approx(x2, abs=tol)
    assert got.y + got.height == pytest.approx(y2, abs=tol)


@settings(max_examples=100, deadline=None)
@given(
    boxes=st.lists(pixel_boxes(), min_size=2, max_size=5),
    box_format=st.sampled_from(BOX_FORMATS),
)
def test_several_boxes_keep_the_model_order(boxes, box_format):
    encoded = [encode(box, box_format) for box in boxes]
    if box_format == "paligemma_loc":
        text = " ; ".join(write(nums, box_format) for nums, _ in encoded)
    else:
        text = json.dumps([{"bbox_2d": nums, "score": 0.5} for nums, _ in encoded])
    parsed = parse_boxes(text, box_format)
    assert len(parsed.boxes) == len(boxes)
    for got, box, (_, tolerance) in zip(parsed.boxes, boxes, encoded, strict=True):
        assert (got.x, got.y) == pytest.approx(box[:2], abs=tolerance + 1e-9)
        assert got.score == (None if box_format == "paligemma_loc" else 0.5)


def assert_valid(parsed: ParsedBoxes, size: tuple[int, int]) -> None:
    assert parsed.status in STATUSES
    assert parsed.dropped >= 0
    if parsed.status == "parse_error":
        assert parsed.error and not parsed.boxes
    else:
        assert parsed.error is None
    if parsed.status == "no_finding":
        assert not parsed.boxes
    for b in parsed.boxes:
        assert all(math.isfinite(v) for v in (b.x, b.y, b.width, b.height))
        assert b.width > 0 and b.height > 0
        assert b.x >= 0 and b.y >= 0
        assert b.x + b.width <= size[0] + 1e-9
        assert b.y + b.height <= size[1] + 1e-9


# Characters that make box-like text likely, so garbage often reaches the box parser.
BOXY = st.text(alphabet="[](){},:.-+eE0123456789 \n'\"nonetarg_bxlsc", max_size=200)
# ... and PaliGemma's location tokens.
LOCS = st.lists(
    st.sampled_from(["<loc0000>", "<loc1023>", "<loc0512>", "<loc", "99>", " ; ", "x", "\n"]),
    max_size=30,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(st.text(max_size=300), BOXY, LOCS),
    box_format=st.sampled_from(BOX_FORMATS),
    size=st.sampled_from([(480, 480), (640, 480), (37, 911)]),
)
def test_garbage_never_raises(text, box_format, size):
    assert_valid(parse_boxes(text, box_format, image_size=size), size)


@pytest.mark.parametrize("box_format", ["pixel_xyxy", "paligemma_loc"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_megabyte_of_adversarial_text_is_read_in_linear_time(shape, box_format):
    assert_linear_time(lambda text: parse_boxes(text, box_format), shape)


def test_boxes_beyond_the_cap_are_dropped_and_counted_in_the_models_order():
    raw = json.dumps([{"bbox_2d": [i, i, i + 10, i + 10], "score": 0.1 * i} for i in range(6)])
    capped = parse_boxes(raw, "pixel_xyxy", max_boxes=4)
    assert [b.x for b in capped.boxes] == [0, 1, 2, 3] and capped.over_cap == 2
    assert from_dict(to_dict(capped)) == capped and to_dict(capped)["over_cap"] == 2
    uncapped = parse_boxes(raw, "pixel_xyxy")
    assert len(uncapped.boxes) == 6 and "over_cap" not in to_dict(uncapped)
    # Degenerate boxes are dropped as before and do not count against the cap.
    degenerate = "[[5, 5, 5, 9], [0, 0, 10, 10], [1, 1, 11, 11]]"
    assert parse_boxes(degenerate, "pixel_xyxy", max_boxes=1).over_cap == 1
    assert parse_boxes(degenerate, "pixel_xyxy", max_boxes=1).dropped == 1
