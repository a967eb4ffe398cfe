"""hf_local on a tiny random checkpoint of every vision-language family it serves.

tests/tiny_vlms.py writes each checkpoint (the family's real model and processor classes,
configured small) to a folder; the adapter loads it with its own loading code and the
three tasks run through ``run_predictions`` with the project's prompts:

- with real generation at batch sizes 1 and 4 (greedy): every answer reaches the parser
  and gets a status, and batching does not change an answer;
- with ``generate`` replaced by one that writes a known answer: the answer is parsed
  into the right box (in the family's own convention, known from the checkpoint's
  ``model_type``), caption and diagnosis;
- at plan time (``check_config``): what a family cannot do is refused in one line.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from support import ROOT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import yaml  # noqa: E402

from novabench.config import (  # noqa: E402
    check_config,
    config_schema,
    validate_config,
)
from novabench.errors import ConfigError, NovaError  # noqa: E402
from novabench.predict import run_predictions  # noqa: E402
from novabench.vlm_families import FAMILIES as KNOWN  # noqa: E402
from novabench.vlm_families import family_of, family_problem  # noqa: E402
from read_back import read_back  # noqa: E402
from tiny_vlms import BOX, DEVICE, FAMILIES, build, script_generate  # noqa: E402

PROMPTS = ROOT / "config" / "prompts"
TASKS = ("localization", "captioning", "diagnosis")
CAPTION = "A ring-enhancing lesion in the left frontal lobe with surrounding oedema."
DIAGNOSIS = {
    "most_likely_diagnosis": "glioblastoma",
    "other_possible_diagnoses": ["metastasis", "abscess", "lymphoma", "tumefactive MS"],
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """Family name -> its tiny checkpoint's folder, each built once per module."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build(name, tmp_path_factory.mktemp(name))
        return built[name]

    return get


def family(folder: Path):
    return family_of(json.loads((folder / "config.json").read_text()))


def runnable(name: str, folder: Path) -> list[str]:
    """The tasks the adapter runs for this family here; skips a family refused here."""
    known = family(folder)
    assert known is not None, f"{name} is not in novabench.vlm_families"
    problem = family_problem(known, image_free_tasks=[], system_prompt=False)
    if problem is not None:
        pytest.skip(f"{name} cannot run here: {problem[0]} (see test_refused_families_*)")
    return [task for task in TASKS if known.text_only or task != "diagnosis"]


# Short prompts for real generation: a tiny model's time goes into reading the prompt.
SHORT = {
    "localization": "Box the lesions in this {width}x{height} slice.",
    "captioning": "Describe this slice.",
    "diagnosis": "History: {clinical_history}\nDiagnosis?",
}


@pytest.fixture(scope="module")
def short_prompts(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("prompts")
    for task, text in SHORT.items():
        (folder / f"{task}-short.txt").write_text(text)
    return {task: folder / f"{task}-short.txt" for task in SHORT}


def predict(
    dataset, tmp_path, folder: Path, task: str, prompt: Path | None = None, **settings
) -> tuple[dict, list[dict]]:
    out = tmp_path / f"{task}-{len(list(tmp_path.iterdir()))}.jsonl"
    summary = run_predictions(
        dataset=dataset,
        task=task,
        model_name="tiny",
        model_cfg={
            "adapter": "hf_local",
            "tasks": [task],
            "settings": {"model": str(folder), "device": DEVICE, **settings},
        },
        prompt_path=prompt or PROMPTS / f"{task}-v1.txt",
        out=out,
        summary_out=out.with_suffix(".summary.json"),
    )
    return summary, read_back(out, dataset)


@pytest.mark.parametrize("name", FAMILIES)
def test_every_task_runs_at_batch_sizes_1_and_4(name, checkpoint, dataset, tmp_path, short_prompts):
    folder = checkpoint(name)
    for task in runnable(name, folder):
        answers = {}
        for batch_size in (1, 4):
            summary, records = predict(
                dataset, tmp_path, folder, task, short_prompts[task],
                batch_size=batch_size, temperature=0, max_new_tokens=3,
            )  # fmt: skip
            counts = summary["status_counts"]
            # Every answer reached the parser and was counted; none failed to generate.
            assert sum(counts.values()) == len(records) == 4, counts
            assert counts["error"] == 0, [r["error"] for r in records]
            assert all(r["status"] in ("ok", "no_finding", "parse_error") for r in records)
            assert all(r["usage"]["completion_tokens"] <= 3 for r in records)
            answers[batch_size] = [r["raw"] for r in records]
        # Left padding and per-sample images: a row answers in a batch as it does alone.
        assert answers[1] == answers[4], task


@pytest.mark.parametrize("name", FAMILIES)
def test_known_answers_reach_the_parser_in_the_family_convention(
    name, checkpoint, dataset, tmp_path, monkeypatch
):
    folder = checkpoint(name)
    tasks = runnable(name, folder)
    answers = {
        "Find every abnormal": FAMILIES[name].answer,
        "Write a concise radiology-style": CAPTION,
        "give the most likely diagnosis": json.dumps(DIAGNOSIS),
    }
    seen = script_generate(
        monkeypatch, folder, lambda prompt: next(a for k, a in answers.items() if k in prompt)
    )
    results = {task: predict(dataset, tmp_path, folder, task, batch_size=4) for task in tasks}

    summary, records = results["localization"]
    # No box_format in the model's config: the family's own, from config.json's model_type.
    assert summary["box_format"] == family(folder).box_format
    assert "trust_remote_code" not in summary["identity"]["settings"]  # only when set
    for record in records:
        assert record["status"] == "ok", record
        (box,) = record["read"]["boxes"]
        assert (box["x"], box["y"], box["width"], box["height"]) == pytest.approx(BOX)
    assert [r["read"]["caption"] for r in results["captioning"][1]] == [CAPTION] * 4
    # The images reached the model with the localization and captioning prompts.
    assert all("pixel_values" in call for call in seen[:2])
    if "diagnosis" in tasks:
        ranked = [DIAGNOSIS["most_likely_diagnosis"], *DIAGNOSIS["other_possible_diagnoses"]]
        assert [r["read"]["ranked"] for r in results["diagnosis"][1]] == [ranked] * 4
        # The diagnosis prompt carries no image.
        assert len(seen[-1]["prompts"]) == 4 and "pixel_values" not in seen[-1]
    assert all(r["status"] == "ok" for _, rows in results.values() for r in rows)


def test_a_declared_box_format_overrides_the_family_default(
    checkpoint, dataset, tmp_path, monkeypatch
):
    folder = checkpoint("gemma3")  # pixel_xyxy by default
    script_generate(monkeypatch, folder, lambda prompt: "lesion: [250, 125, 500, 375]")
    out = tmp_path / "p.jsonl"
    summary = run_predictions(
        dataset=dataset,
        task="localization",
        model_name="tiny",
        model_cfg={
            "adapter": "hf_local",
            "tasks": ["localization"],
            "box_format": "xyxy_1000",
            "settings": {"model": str(folder), "device": DEVICE},
        },
        prompt_path=PROMPTS / "localization-v1.txt",
        out=out,
        summary_out=tmp_path / "p.summary.json",
    )
    assert summary["box_format"] == "xyxy_1000"
    box = read_back(out, dataset)[0]["read"]["boxes"][0]
    # 0-1000 of 480: x 120..240, y 60..180 (read as pixels it would be 250..500).
    assert (box["x"], box["y"], box["width"], box["height"]) == pytest.approx(BOX)


def test_a_batch_the_processor_refuses_is_a_one_line_error(checkpoint, monkeypatch):
    from novabench.models.base import Sample
    from novabench.models.hf_local import Adapter
    from upstream import png_bytes

    # As Gemma 3 did when it got one flat list of four images for four prompts.
    def refuse(self, **call):
        raise ValueError("Found [1, 1] <start_of_image> tokens and\n[2] images per sample.")

    monkeypatch.setattr(transformers.Gemma3Processor, "__call__", refuse)
    model = Adapter("vlm", {"model": str(checkpoint("gemma3")), "device": DEVICE})
    samples = [Sample(f"c{i}.png", f"c{i}", "localization", "Find it.", png_bytes(i), 480, 480)
               for i in range(2)]  # fmt: skip
    with pytest.raises(NovaError) as caught:
        list(model.predict(samples))
    assert str(caught.value) == (
        "models.vlm: Gemma3Processor refused a batch of 2 (Found [1, 1] <start_of_image> tokens "
        "and [2] images per sample.); fix: try settings.batch_size: 1, and report it with the "
        "model's name"
    )


# -- plan-time refusals ----------------------------------------------------------------

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")


def plan_error(model: dict) -> str:
    """The one-line ConfigError that planning a run with ``model`` raises."""
    config = copy.deepcopy(DEFAULT)
    config["models"] = {"vlm": {"adapter": "hf_local", **model}}
    validate_config(config, config_schema(ROOT))
    with pytest.raises(ConfigError) as caught:
        check_config(config, ROOT)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_paligemma_refuses_text_only_tasks_and_system_prompts(checkpoint):
    folder = str(checkpoint("paligemma"))
    message = plan_error({"tasks": list(TASKS), "settings": {"model": folder}})
    assert message == (
        f"models.vlm: {folder} is a PaliGemma checkpoint (paligemma): PaliGemma answers only "
        "about an image, and diagnosis sends none; fix: remove diagnosis from the model's tasks"
    )
    message = plan_error(
        {"tasks": ["localization"], "settings": {"model": folder, "system_prompt": "Be brief."}}
    )
    assert message.endswith(
        "PaliGemma has no chat template, so no system prompt; fix: remove system_prompt"
    )


def test_refused_families_are_refused_at_plan_time(tmp_path, checkpoint):
    florence = tmp_path / "florence"
    florence.mkdir()
    (florence / "config.json").write_text(json.dumps({"model_type": "florence2"}))
    message = plan_error({"tasks": ["captioning"], "settings": {"model": str(florence)}})
    assert message == (
        f"models.vlm: {florence} is a Florence-2 checkpoint (florence2): Florence-2 answers "
        "fixed task tokens (<OD>, <MORE_DETAILED_CAPTION>), not questions, so it cannot follow "
        "the benchmark's prompts; fix: serve it with vLLM and use adapter openai_compatible, "
        "or use another model"
    )
    # transformers 5.24's Pixtral processor (Mistral 3, and Pixtral-12B: a llava checkpoint
    # with a Pixtral tower) imports torchvision.
    pixtral = tmp_path / "pixtral"
    pixtral.mkdir()
    config_json = {"model_type": "llava", "vision_config": {"model_type": "pixtral"}}
    (pixtral / "config.json").write_text(json.dumps(config_json))
    for folder, model_type in ((str(checkpoint("mistral3")), "mistral3"), (pixtral, "llava")):
        settings = {"tasks": ["localization"], "settings": {"model": str(folder)}}
        try:
            import torchvision  # noqa: F401
        except ImportError:
            assert plan_error(settings) == (
                f"models.vlm: {folder} is a Mistral 3 / Pixtral checkpoint ({model_type}): "
                "transformers' Mistral 3 / Pixtral processor needs torchvision, which the "
                "pipeline's environment leaves out; fix: serve it with vLLM and use adapter "
                "openai_compatible"
            )
        else:
            config = copy.deepcopy(DEFAULT)
            config["models"] = {"vlm": {"adapter": "hf_local", **settings}}
            check_config(config, ROOT)


def test_every_tiny_family_is_a_known_family():
    # Each table entry of tiny_vlms is a family the adapter declares (and vice versa, but
    # for the MoE variants that share their family's processor and convention, and
    # Florence-2, refused without loading).
    tiny = {entry.model_type for entry in FAMILIES.values()}
    assert tiny <= set(KNOWN)
    untested = set(KNOWN) - tiny
    assert untested == {"qwen3_vl_moe", "qwen3_5_moe", "glm4v_moe", "pixtral", "florence2"}
    # A llava checkpoint is LLaVA-1.5 unless its vision tower is Pixtral's.
    clip = {"model_type": "llava", "vision_config": {"model_type": "clip_vision_model"}}
    assert family_of(clip).title == "LLaVA-1.5" and family_of(clip).box_format == "xyxy_01"
    pixtral = {"model_type": "llava", "vision_config": {"model_type": "pixtral"}}
    assert family_of(pixtral).title == "Mistral 3 / Pixtral"
    assert family_of({"model_type": "blip-2"}) is None


def test_an_unknown_family_must_declare_its_box_format(tmp_path, dataset):
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "blip-2"}))
    with pytest.raises(ConfigError, match=r"models\.tiny runs localization but declares no "):
        run_predictions(
            dataset=dataset,
            task="localization",
            model_name="tiny",
            model_cfg={
                "adapter": "hf_local",
                "tasks": ["localization"],
                "settings": {"model": str(folder)},
            },
            prompt_path=PROMPTS / "localization-v1.txt",
            out=tmp_path / "p.jsonl",
            summary_out=tmp_path / "p.summary.json",
        )


# -- code from the model's repository --------------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REMOTE_CONFIG = """from transformers import LlavaConfig


class TinyRemoteConfig(LlavaConfig):
    model_type = "tiny_remote_vlm"
"""
REMOTE_MODEL = """from transformers import LlavaForConditionalGeneration

from .configuration_tiny_remote import TinyRemoteConfig


class TinyRemoteForConditionalGeneration(LlavaForConditionalGeneration):
    config_class = TinyRemoteConfig
"""


def remote_code_checkpoint(llava: Path, folder: Path) -> Path:
    """The tiny LLaVA, turned into an architecture that lives in the checkpoint's own
    Python files (as Phi-3.5-vision's does), not in transformers."""
    for path in llava.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "configuration_tiny_remote.py").write_text(REMOTE_CONFIG)
    (folder / "modeling_tiny_remote.py").write_text(REMOTE_MODEL)
    config = json.loads((folder / "config.json").read_text())
    config.update(
        model_type="tiny_remote_vlm",
        architectures=["TinyRemoteForConditionalGeneration"],
        auto_map={
            "AutoConfig": "configuration_tiny_remote.TinyRemoteConfig",
            "AutoModelForImageTextToText": (
                "modeling_tiny_remote.TinyRemoteForConditionalGeneration"
            ),
        },
    )
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_remote_code_is_an_opt_in_pinned_to_a_commit(checkpoint, tmp_path, dataset):
    folder = tmp_path / "remote"
    folder.mkdir()
    remote_code_checkpoint(checkpoint("llava"), folder)
    fix = (
        "fix: set revision to the commit whose code you reviewed (the model page's file history "
        "lists them), or remove trust_remote_code"
    )
    for revision, shown in ((None, "main"), ("v1.0", "v1.0"), (COMMIT.upper(), COMMIT.upper())):
        settings = {"model": str(folder), "trust_remote_code": True, "revision": revision}
        assert plan_error({"tasks": ["captioning"], "settings": settings}) == (
            "models.vlm.settings.trust_remote_code runs code from the model's repository, so "
            f"settings.revision must pin a commit (40 hex digits), not {shown}; {fix}"
        )
    # Without the opt-in the job stops before loading anything.
    with pytest.raises(NovaError) as caught:
        predict(dataset, tmp_path, folder, "captioning")
    assert str(caught.value) == (
        f"models.tiny: {folder} (tiny_remote_vlm) runs on code from its repository, not an "
        f"architecture of transformers {transformers.__version__}; fix: set "
        "settings.trust_remote_code: true with settings.revision pinned to a reviewed commit, or "
        "serve it with vLLM and use adapter openai_compatible"
    )
    # With it, the model runs and its provenance records both settings.
    summary, records = predict(
        dataset, tmp_path, folder, "captioning",
        trust_remote_code=True, revision=COMMIT, max_new_tokens=2,
    )  # fmt: skip
    assert summary["status_counts"]["error"] == 0 and len(records) == 4
    assert summary["identity"]["settings"]["trust_remote_code"] is True
    assert summary["identity"]["settings"]["revision"] == COMMIT
