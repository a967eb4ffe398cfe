"""The model catalog: ready-made ``models:`` entries a configuration enables by name.

``config/models/*.yaml`` hold named entries (adapter, tasks, box convention, settings and an
``info`` block of documentation: provider, family, price, source, date checked). A
configuration names them instead of writing them out:

    models: [gold, gpt-4o, qwen2.5-vl-7b]           # a list of catalog names
    models:                                          # or a mapping, with overrides
      gpt-4o: {}                                     #   the entry as it is
      my-qwen:                                       #   a copy under another name,
        from: qwen2.5-vl-7b                          #   its settings merged over the entry's
        settings: {base_url: http://gpu-node:8000/v1}

An entry of the mapping form that has an ``adapter`` is a full entry and is kept as it is,
so configurations written before the catalog work unchanged. :func:`expand_models` turns
every form into full entries; it runs before the schema validation (common.smk and
``novabench estimate``), so everything after it (schema, plan-time checks, rules) sees
full entries only.

``info`` never changes what runs: the predict rule's parameters leave it out (a new price
re-runs nothing), and only ``novabench estimate`` and the catalog's README table read it.
"""

from __future__ import annotations

import copy
import datetime
import difflib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench import vlm_families
from novabench.errors import ConfigError, NovaError
from novabench.tokens import IMAGE_RULES
from novabench.yaml_data import load_yaml

CATALOG_README = "config/models/README.md"
_TABLE_START = "<!-- catalog-table:start (generated: novabench catalog --readme) -->"
_TABLE_END = "<!-- catalog-table:end -->"


@dataclass(frozen=True)
class Family:
    """What the catalog knows about a family of models, whoever serves them."""

    title: str
    #: The box convention the family answers in; None: it follows the prompt.
    box_format: str | None
    #: Image tokens per image for the estimate: a rule of novabench.estimate.IMAGE_RULES,
    #: or a fixed count.
    image_tokens: str | int


def _open(model_type: str, title: str, image_tokens: str | int) -> Family:
    """An open family: its box convention is the one the local adapter applies to it
    (``vlm_families``), so a vLLM-served and a local model of a family answer alike."""
    return Family(title, vlm_families.FAMILIES[model_type].box_format, image_tokens)


# Keys of the open families are transformers' ``model_type`` names, as in the hf_local
# adapter's family table. API families name the provider's model line.
FAMILIES: dict[str, Family] = {
    "gpt": Family("OpenAI GPT", None, "openai_tiles"),
    "gemini": Family("Google Gemini", "gemini_yxyx_1000", "gemini"),
    "claude": Family("Anthropic Claude", None, "claude"),
    "mistral": Family("Mistral", None, "pixtral16"),
    # xAI publishes no image-token rule we could check: 448-px tiles of 256 plus one.
    "grok": Family("xAI Grok", None, 1280),
    "qwen2_vl": _open("qwen2_vl", "Qwen2-VL", "qwen2_vl"),
    "qwen2_5_vl": _open("qwen2_5_vl", "Qwen2.5-VL", "qwen2_vl"),
    "qwen3_vl": _open("qwen3_vl", "Qwen3-VL", "qwen3_vl"),
    "qwen3_vl_moe": _open("qwen3_vl_moe", "Qwen3-VL (MoE)", "qwen3_vl"),
    "llava": _open("llava", "LLaVA-1.5", 576),  # 336 px / 14-px patches = 24 x 24
    "llava_next": _open("llava_next", "LLaVA-NeXT", 2880),  # 2x2 grid of 576 + a base view
    "llava_onevision": _open("llava_onevision", "LLaVA-OneVision", 3645),  # 2x2 of 729 + base
    "idefics3": _open("idefics3", "Idefics3", 2873),  # 4x4 tiles of 364 px + global, 169 each
    "smolvlm": _open("smolvlm", "SmolVLM", 1377),  # 4x4 tiles of 384 px + global, 81 each
    "gemma3": _open("gemma3", "Gemma 3 / MedGemma", 256),  # fixed 896x896 view
    "paligemma": _open("paligemma", "PaliGemma", 1024),  # 448 px / 14-px patches
    "internvl": _open("internvl", "InternVL", 256),  # one 448-px tile for a square image
    "mistral3": _open("mistral3", "Mistral Small 3.1", "mistral28"),
    "pixtral": _open("pixtral", "Pixtral", "pixtral16"),
    # Llama 3.2 Vision reads the image by cross-attention: one token in the prompt.
    "mllama": _open("mllama", "Llama 3.2 Vision", 1),
    "baseline": Family("novabench baseline", None, 0),
    # Text-only LLMs (open judges): no image in their prompts.
    "text_llm": Family("text-only LLM", None, 0),
}


@dataclass(frozen=True)
class Entry:
    """One catalog entry and the file it comes from."""

    name: str
    file: str  # the YAML file's stem, e.g. "openai"
    config: dict[str, Any]


def default_catalog_dir(basedir: Path) -> Path:
    return Path(basedir) / "config" / "models"


def _iso_dates(entry: Any) -> Any:
    """YAML reads ``checked: 2026-12-01`` as a date; the config holds it as text."""
    info = entry.get("info") if isinstance(entry, Mapping) else None
    if isinstance(info, MutableMapping) and isinstance(info.get("checked"), datetime.date):
        info["checked"] = info["checked"].isoformat()
    return entry


def load_catalog(catalog_dir: Path) -> dict[str, Entry]:
    """Every entry of ``catalog_dir/*.yaml``; a name defined twice is an error."""
    catalog_dir = Path(catalog_dir)
    files = sorted(catalog_dir.glob("*.yaml"))
    if not files:
        raise ConfigError(
            f"no model catalog in {catalog_dir} (no *.yaml files)",
            "restore config/models/ from the repository, or write full model entries",
        )
    entries: dict[str, Entry] = {}
    for path in files:
        try:
            content = load_yaml(path.read_bytes(), str(path)) or {}
        except NovaError as exc:
            raise ConfigError(str(exc)) from None
        if not isinstance(content, dict):
            raise ConfigError(f"{path} must map entry names to entries", "fix the file")
        for name, config in content.items():
            if name in entries:
                raise ConfigError(
                    f"catalog entry {name!r} is defined in {entries[name].file}.yaml and "
                    f"{path.name}",
                    "give one of them another name",
                )
            if not isinstance(config, dict) or "adapter" not in config:
                raise ConfigError(
                    f"{path}: catalog entry {name!r} is not a full model entry",
                    "give it adapter, tasks, settings and info",
                )
            entries[str(name)] = Entry(str(name), path.stem, _iso_dates(config))
    return entries


def merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` merged into ``base`` as Snakemake merges config files: mappings key by
    key, anything else (lists, numbers, null) replaced."""
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _unknown_entry(name: str, source: str, catalog: Mapping[str, Entry]) -> ConfigError:
    close = difflib.get_close_matches(source, list(catalog), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return ConfigError(
        f"models.{name}: no catalog entry called {source!r}{hint}",
        f"use a name listed in {CATALOG_README}, or give a full entry with adapter, tasks "
        "and settings",
    )


def _as_mapping(models: Any) -> Mapping[str, Any] | None:
    """The list form as a mapping of references without overrides."""
    if not isinstance(models, list):
        return models if isinstance(models, Mapping) else None
    seen: dict[str, None] = {}
    for number, item in enumerate(models):
        if not isinstance(item, str):
            raise ConfigError(
                f"models[{number}] is {item!r}, not a catalog name",
                "list catalog names only, or use the mapping form to override settings",
            )
        if item in seen:
            raise ConfigError(f"models lists {item!r} twice", "list each model once")
        seen[item] = None
    return seen


def expand_models(config: MutableMapping[str, Any], catalog_dir: Path) -> None:
    """Replace every catalog reference under ``config["models"]`` by its full entry.

    A reference is a name of the list form, or a mapping entry without ``adapter`` (its
    catalog entry is ``from``, else its own name; its other keys are merged over the
    entry). Anything else is left for the schema to judge.
    """
    models = _as_mapping(config.get("models"))
    if models is None:
        return
    catalog: dict[str, Entry] | None = None
    expanded: dict[str, Any] = {}
    for name, entry in models.items():
        if entry is not None and not isinstance(entry, Mapping):
            expanded[name] = entry  # the schema names the bad value
            continue
        if entry is not None and "adapter" in entry:
            if "from" in entry:
                raise ConfigError(
                    f"models.{name} has both adapter and from",
                    "write a full entry, or name a catalog entry with `from` and override "
                    "its keys, not both",
                )
            expanded[name] = _iso_dates(dict(entry))
            continue
        overrides = dict(entry or {})
        source = overrides.pop("from", name)
        if not isinstance(source, str):
            raise ConfigError(f"models.{name}.from is {source!r}", "give a catalog entry's name")
        catalog = catalog if catalog is not None else load_catalog(catalog_dir)
        if source not in catalog:
            raise _unknown_entry(name, source, catalog)
        expanded[name] = _iso_dates(merge(copy.deepcopy(catalog[source].config), overrides))
    config["models"] = expanded


def _unknown(key: str, what: str, value: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(value, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(f"{key}: unknown {what} {value!r}{hint}", f"use one of {', '.join(known)}")


def check_model_info(name: str, model: Mapping[str, Any]) -> None:
    """Plan-time check of the names in a model's ``info`` (the schema checks the rest):
    its family and its image-token rule."""
    info = model.get("info") or {}
    family = info.get("family")
    if family is not None and family not in FAMILIES:
        raise _unknown(f"models.{name}.info.family", "family", family, list(FAMILIES))
    rule = info.get("image_tokens")
    if isinstance(rule, str) and rule not in IMAGE_RULES:
        raise _unknown(f"models.{name}.info.image_tokens", "rule", rule, list(IMAGE_RULES))


def predict_params(model: Mapping[str, Any]) -> dict[str, Any]:
    """What a prediction job is given of a model: everything but ``info`` and ``audit``, so
    that editing the documentation (a price, a date) or naming a judge audit sheet does not
    re-run predictions."""
    return {key: value for key, value in model.items() if key not in ("info", "audit")}


# -- the README table ---------------------------------------------------------------------


def _price_cell(info: Mapping[str, Any]) -> str:
    price = info.get("price_usd_per_million_tokens")
    if not price:
        return info.get("price_note") or "-"
    return f"{price['input']:g} / {price['output']:g}"


def entry_tasks(config: Mapping[str, Any]) -> list[str]:
    """The tasks an entry runs: its ``tasks``, else every task its adapter supports."""
    from novabench.models.base import adapter_kind
    from novabench.tasks import task_names

    if config.get("tasks") is not None:
        return list(config["tasks"])
    adapter = adapter_kind(config["adapter"])
    return [task for task in task_names() if adapter.supports(task)]


def _box_cell(config: Mapping[str, Any]) -> str:
    from novabench.tasks import get_task

    if config.get("box_format"):
        return config["box_format"]
    boxes = any(get_task(task).needs_box_format for task in entry_tasks(config))
    return "the adapter's" if boxes else "-"


def _family_cell(info: Mapping[str, Any]) -> str:
    family = FAMILIES.get(info.get("family", ""))
    title = family.title if family else info.get("family", "?")
    return f"{title} / {info.get('provider', '?')}"


def catalog_table(catalog: Mapping[str, Entry]) -> str:
    """The catalog as the Markdown table of config/models/README.md."""
    files = sorted({entry.file for entry in catalog.values()})
    lines = [
        f"{len(catalog)} entries in {len(files)} files.",
        "",
        "| name | file | family / provider | adapter | box convention "
        "| USD per M tokens (in / out) | checked |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for entry in sorted(catalog.values(), key=lambda e: (e.file, e.name)):
        config, info = entry.config, entry.config.get("info") or {}
        lines.append(
            f"| `{entry.name}` | {entry.file} | {_family_cell(info)} | {config['adapter']} "
            f"| {_box_cell(config)} | {_price_cell(info)} "
            f"| {info.get('checked') or '-'} |"
        )
    return "\n".join(lines)


def readme_with_table(readme: str, table: str) -> str:
    """``readme`` with the text between the table markers replaced by ``table``."""
    head, start, rest = readme.partition(_TABLE_START)
    _, end, tail = rest.partition(_TABLE_END)
    if not start or not end:
        raise ConfigError(
            f"{CATALOG_README} lacks the table markers",
            f"put {_TABLE_START} and {_TABLE_END} where the table goes",
        )
    return f"{head}{start}\n{table}\n{end}{tail}"
