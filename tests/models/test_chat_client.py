"""The chat client against hostile servers and careless settings: a total time limit per
request across its retries, and addresses that carry credentials (refused at plan time)."""

from __future__ import annotations

import copy
import time

import pytest
import yaml

from novabench.config import read_config
from novabench.errors import ConfigError, NovaError
from novabench.predict import run_predictions
from openai_server import Fail, FakeOpenAI
from support import ROOT
from upstream import build_local_dataset

PROMPT = ROOT / "config" / "prompts" / "localization-v1.txt"
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
PASSWORD = "pw-0b7e5d1c9a"


@pytest.fixture(scope="module")
def four_images(tmp_path_factory):
    return build_local_dataset(tmp_path_factory.mktemp("four"))


def run_api_model(dataset, out, base_url: str, **more) -> dict:
    settings = {"base_url": base_url, "model": "m", "api_key_env": None, **more}
    cfg = {"adapter": "openai_compatible", "box_format": "pixel_xyxy", "settings": settings}
    return run_predictions(
        dataset=dataset,
        task="localization",
        model_name="api",
        model_cfg=cfg,
        prompt_path=PROMPT,
        out=out / "api.jsonl",
        summary_out=out / "api.summary.json",
        cache_dir=out / "cache",
    )


# -- bounded waiting ------------------------------------------------------------------------


def test_a_server_always_answering_429_retry_after_600_ends_the_job_at_the_time_limit(
    four_images, tmp_path
):
    with FakeOpenAI(lambda seen: Fail(429, retry_after="600")) as server:
        started = time.monotonic()
        with pytest.raises(NovaError) as error:
            # 0.05 min = 3 s; without the limit six attempts 600 s apart per request.
            run_api_model(
                four_images, tmp_path, server.base_url, request_time_limit_min=0.05, concurrency=2
            )
        elapsed = time.monotonic() - started
    message = str(error.value)
    assert elapsed < 30, f"the job waited {elapsed:.0f} s"
    assert "4 of 4 requests failed" in message and "\n" not in message
    assert "would pass request_time_limit_min (0.05 min)" in message
    assert len(server.requests) < 4 * 6, "the limit should stop the retries, not max_attempts"


def test_the_time_limit_is_a_checked_setting_in_minutes(four_images, tmp_path):
    with pytest.raises(ConfigError, match=r"request_time_limit_min"):
        run_api_model(four_images, tmp_path, "http://127.0.0.1:9/v1", request_time_limit_min=0)


# -- credentials in an address --------------------------------------------------------------


def planned(change) -> str:
    config = copy.deepcopy(DEFAULT)
    change(config)
    try:
        read_config(config, ROOT)
    except ConfigError as exc:
        return str(exc)
    return "planned"


def api_model(url_key: str = "base_url") -> dict:
    settings = {"base_url": "http://127.0.0.1:8000/v1", "model": "m", "api_key_env": None}
    settings[url_key] = f"http://novauser:{PASSWORD}@127.0.0.1:8000/v1"
    return {"adapter": "openai_compatible", "tasks": ["diagnosis"], "settings": settings}


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (
            lambda c: c["models"].update(api=api_model()),
            "models.api.settings.base_url",
        ),
        (
            lambda c: c["models"].update(api=api_model("cache_url")),
            "models.api.settings.cache_url",
        ),
        (
            lambda c: c["models"].update(
                managed={
                    "adapter": "vllm",
                    "tasks": ["diagnosis"],
                    "settings": {**api_model()["settings"], "serve": {"gpus": 0}},
                }
            ),
            "models.managed.settings.base_url",
        ),
        (
            lambda c: c["judges"].update(
                j={"kind": "llm", "settings": {"backend": api_model()["settings"]}}
            ),
            "judges.j.settings.backend.base_url",
        ),
    ],
    ids=["model", "model-cache-url", "managed-model", "llm-judge"],
)
def test_credentials_in_an_address_are_refused_at_plan_time_without_repeating_them(change, where):
    message = planned(change)
    assert message.startswith(f"{where} holds credentials (user:password@)"), message
    assert "api_key_env" in message and "\n" not in message
    assert PASSWORD not in message and "novauser" not in message
