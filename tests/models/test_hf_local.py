"""The local transformers adapter on a tiny, randomly initialised Qwen2.5-VL.

Nothing is downloaded: tests/tiny_vlms.py writes the tokenizer (bytes as tokens plus Qwen's
special tokens), the Qwen2-VL image processor, a Qwen2-VL-style chat template and a
two-layer model of the real architecture to a folder, which is loaded back through the
adapter's own loading code with ``local_files_only``. Every other family is run the same way
in test_hf_families.py. Chat template, image processing, left-padded batching,
generation and decoding all run for real; where a test needs a known answer, ``generate``
is replaced by one that writes given tokens after the prompt.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # transformers needs it to place a model (device_map)

from novabench.errors import ConfigError, NovaError  # noqa: E402
from novabench.models.base import Sample, load_adapter  # noqa: E402
from novabench.models.hf_local import (  # noqa: E402
    Adapter,
    job_gpus,
    resolve_settings,
)
from novabench.predict import run_predictions  # noqa: E402
from read_back import read_back  # noqa: E402
from tiny_vlms import DEVICE, build_qwen, script_generate  # noqa: E402
from upstream import png_bytes  # noqa: E402


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    """A folder holding a tiny Qwen2.5-VL checkpoint with its processor, with the pixel
    budget Qwen2.5-VL's checkpoints ship in preprocessor_config.json."""
    folder = tmp_path_factory.mktemp("tiny-qwen25-vl")
    build_qwen(folder, "2.5", pixels=(3136, 12845056))
    return folder


# A pixel budget that makes 480x480 a 392x392 frame (see the frame test), to keep it fast.
SMALL = 156800


def sample(i: int, prompt: str, image: bool = True) -> Sample:
    return Sample(
        filename=f"case{i:04d}_001.png",
        case_id=f"case{i:04d}",
        task="localization" if image else "diagnosis",
        prompt=prompt,
        image_png=png_bytes(i) if image else None,
        width=480,
        height=480,
    )


def adapter(folder, **settings) -> Adapter:
    return Adapter("tiny", {"model": str(folder), "device": DEVICE, **settings})


def test_batching_keeps_order_and_greedy_answers(tiny_qwen):
    samples = [sample(i, "Find the lesion." + " Be precise." * i) for i in range(4)]
    settings = {"temperature": 0, "max_new_tokens": 6, "max_pixels": SMALL}
    single = list(adapter(tiny_qwen, batch_size=1, **settings).predict(samples))
    batched = list(adapter(tiny_qwen, batch_size=3, **settings).predict(samples))
    assert len(single) == len(batched) == 4
    # Left padding and masking make the rows of a batch answer as they do alone.
    assert [r.raw for r in batched] == [r.raw for r in single]
    assert len({r.raw for r in single}) > 1  # different inputs, different answers
    assert [r.usage for r in batched] == [r.usage for r in single]  # padding is not counted
    assert all(r.error is None and r.usage["completion_tokens"] <= 6 for r in batched)
    assert all(r.frame_size == (392, 392) for r in batched)


def test_sampling_is_reproducible_with_a_seed(tiny_qwen):
    samples = [sample(i, "Describe the image.") for i in range(2)]
    settings = {"temperature": 1.0, "seed": 7, "max_new_tokens": 6, "max_pixels": SMALL}
    first = [r.raw for r in adapter(tiny_qwen, **settings).predict(samples)]
    again = [r.raw for r in adapter(tiny_qwen, **settings).predict(samples)]
    assert first == again


@pytest.mark.parametrize(
    ("min_pixels", "max_pixels", "frame"),
    [
        # The checkpoint's own budget (3136 to 12845056): 480 rounds to 17 x 28 = 476.
        (None, None, (476, 476)),
        # 476x476 = 226576 > 156800: scale by sqrt(480*480/156800) = 1.2122;
        # floor(480 / 1.2122 / 28) = 14 patches of 28 -> 392.
        (3136, 156800, (392, 392)),
        # 226576 < 250000: scale by sqrt(250000/230400); 480 -> 500, ceil(500 / 28) = 18 -> 504.
        (250000, 12845056, (504, 504)),
    ],
)
def test_frame_size_follows_the_pixel_budget(tiny_qwen, min_pixels, max_pixels, frame):
    model = adapter(tiny_qwen, min_pixels=min_pixels, max_pixels=max_pixels, max_new_tokens=1)
    (response,) = model.predict([sample(1, "Find the lesion.")])
    assert response.frame_size == frame


def test_chat_template_decoding_and_order_with_scripted_answers(tiny_qwen, monkeypatch):
    seen = script_generate(
        monkeypatch, tiny_qwen, lambda prompt: "answer to " + re.search(r"tag-\d", prompt)[0]
    )
    model = adapter(tiny_qwen, batch_size=3, system_prompt="You are a radiologist.")
    samples = [sample(i, f"tag-{i}" + " pad" * (3 - i)) for i in range(4)]
    responses = list(model.predict(samples))
    # Only the new tokens are decoded, specials and padding dropped, rows kept in order.
    assert [r.raw for r in responses] == [f"answer to tag-{i}" for i in range(4)]
    assert [r.usage["completion_tokens"] for r in responses] == [len("answer to tag-0") + 1] * 4
    # Left padding: each " pad" is 4 byte tokens, so rows 0, 1, 2 get 0, 4, 8 pad tokens.
    prompts = seen[0]["prompts"]
    assert [len(re.match(r"(<\|endoftext\|>)*", p)[0]) // 13 for p in prompts] == [0, 4, 8]
    body = prompts[0]
    assert body.startswith("<|im_start|>system\nYou are a radiologist.<|im_end|>\n")
    assert "<|im_start|>user\n<|vision_start|><|image_pad|>" in body
    assert body.count("<|image_pad|>") == (476 // 28) ** 2  # one token per merged patch
    assert body.endswith("tag-0 pad pad pad<|im_end|>\n<|im_start|>assistant\n")
    options = seen[0]
    assert options["do_sample"] is True and options["temperature"] == pytest.approx(0.1)

    (text_only,) = model.predict([sample(9, "tag-9", image=False)])
    assert text_only.raw == "answer to tag-9" and text_only.frame_size is None
    assert "<|image_pad|>" not in seen[-1]["prompts"][0]


def test_boxes_map_back_from_the_resized_frame_through_predict(
    tiny_qwen, monkeypatch, tmp_path, dataset
):
    # Frame 392x392 (see above): 392 pixels there are 480 here, so [98, 49, 196, 147]
    # becomes x 120..240, y 60..180.
    answer = '```json\n[{"bbox_2d": [98, 49, 196, 147], "label": "lesion"}]\n```'
    seen = script_generate(monkeypatch, tiny_qwen, lambda prompt: answer)
    summary = run_predictions(
        dataset=dataset,
        task="localization",
        model_name="tiny",
        model_cfg={
            "adapter": "hf_local",
            "tasks": ["localization"],
            "box_format": "qwen25_bbox_2d",
            "settings": {"model": str(tiny_qwen), "device": DEVICE, "max_pixels": SMALL},
        },
        prompt_path=_prompt(tmp_path, "Find lesions in this {width}x{height} slice."),
        out=tmp_path / "p.jsonl",
        summary_out=tmp_path / "p.summary.json",
    )
    records = read_back(tmp_path / "p.jsonl", dataset)
    assert summary["status_counts"]["ok"] == len(records) == 4
    for record in records:
        # Read in the pixels of the frame the model saw (recorded with the answer).
        assert record["frame_size"]
        (box,) = record["read"]["boxes"]
        assert (box["x"], box["y"], box["width"], box["height"]) == pytest.approx(
            (120.0, 60.0, 120.0, 120.0)
        )
        assert box["label"] == "lesion" and record["raw"] == answer
    assert summary["identity"]["settings"]["max_pixels"] == SMALL
    assert "device" not in summary["identity"]["settings"]
    assert "Find lesions in this 480x480 slice." in seen[0]["prompts"][0]


def _prompt(tmp_path, text):
    path = tmp_path / "localization-test.txt"
    path.write_text(text)
    return path


def one_line_error(call) -> str:
    with pytest.raises(NovaError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_missing_weights_are_a_one_line_error_before_and_during_the_job(tmp_path):
    absent = {"model": "novabench-test/absent-model", "revision": "abc123"}
    message = one_line_error(lambda: Adapter.check_environment("vlm", absent))
    assert message.startswith("models.vlm: the weights of novabench-test/absent-model")
    assert "hf download novabench-test/absent-model --revision abc123" in message
    assert "local_files_only: false" in message
    # The job's own loading path says the same, without trying the network.
    job = load_adapter("vlm", {"adapter": "hf_local", "settings": absent})
    assert one_line_error(lambda: list(job.predict([sample(0, "x")]))) == message
    # Allowing downloads skips the check (the job may fetch the weights).
    Adapter.check_environment("vlm", {**absent, "local_files_only": False})

    missing = tmp_path / "no" / "such" / "folder"
    assert "does not exist" in one_line_error(
        lambda: Adapter.check_environment("vlm", {"model": str(missing)})
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no config.json" in one_line_error(
        lambda: Adapter.check_environment("vlm", {"model": str(empty)})
    )


def test_settings_are_validated_and_gpus_requested():
    with pytest.raises(ConfigError, match="unknown setting temprature"):
        resolve_settings("vlm", {"model": "m", "temprature": 0.1})
    with pytest.raises(ConfigError, match="missing setting model"):
        resolve_settings("vlm", {})
    with pytest.raises(ConfigError, match="device"):
        resolve_settings("vlm", {"model": "m", "device": "gpu"})
    with pytest.raises(ConfigError, match="min_pixels"):
        resolve_settings("vlm", {"model": "m", "min_pixels": 10, "max_pixels": 5})
    assert resolve_settings("vlm", {"model": "m"})["local_files_only"] is True
    local = {"adapter": "hf_local", "settings": {"model": "m"}}
    assert job_gpus(local) == 1
    assert job_gpus({**local, "settings": {"model": "m", "device": "cpu"}}) == 0
    assert job_gpus({**local, "settings": {"model": "m", "gpus": 4}}) == 4
    assert job_gpus({"adapter": "gold"}) == 0
