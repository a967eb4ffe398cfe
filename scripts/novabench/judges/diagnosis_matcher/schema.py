"""The shape of the matcher's synonym tables (TABLES_SCHEMA) and their checks.

``check_tables`` refuses, with one line naming file and key, tables of the wrong shape,
tables whose ``rules`` are not the matcher's (RULE_IDS), and rule words that name a
qualifier group the tables lack.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.diagnosis_matcher.verdicts import RULE_IDS
from novabench.yaml_data import load_yaml


def read_yaml(path: Path, what: str) -> tuple[bytes, Any]:
    """The file's bytes and its YAML content; NovaError naming ``what`` when unreadable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NovaError(
            f"cannot load {what} {path} ({exc})",
            "point the judge's setting at a valid YAML file of that kind",
        ) from exc
    return raw, load_yaml(raw, f"{what} {path}")


_STRINGS = {"type": "array", "items": {"type": "string"}}
_NULLABLE = {"type": ["array", "null"], "items": {"type": "string"}}
_STRING_MAP = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
_NAME_MAP = {"type": ["object", "null"], "additionalProperties": _NULLABLE}
_PHRASES = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
_WORD = {"type": "string", "minLength": 1}
# The word lists every table file has.
_WORD_LISTS = ("hedges", "filler", "connectors", "negations", "generic_modifiers", "generic_heads")
# The shape of the synonym tables; an unknown key anywhere is refused by name.
TABLES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [*_WORD_LISTS, "rules", "rule_words"],
    "properties": {
        "version": {"type": "integer"},
        **dict.fromkeys(_WORD_LISTS, _STRINGS),
        **dict.fromkeys(("groups", "prediction_cutoffs", "regraded"), _NULLABLE),
        "concepts": _NAME_MAP,
        "broader": _NAME_MAP,
        "expansions": _STRING_MAP,
        "word_variants": _STRING_MAP,
        "inherent": {
            "type": ["object", "null"],
            "additionalProperties": {"type": "object", "additionalProperties": _STRINGS},
        },
        "qualifiers": {
            "type": ["object", "null"],
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "roles": {
                        "type": "array",
                        "items": {"enum": list(qualifiers.ROLES)},
                        "uniqueItems": True,
                    },
                    "values": {"type": ["object", "null"], "additionalProperties": _NULLABLE},
                    "within": {
                        "type": ["object", "null"],
                        "additionalProperties": {"anyOf": [{"type": "string"}, _STRINGS]},
                    },
                },
            },
        },
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "verdict", "says", "examples"],
                "properties": {
                    "id": _WORD,
                    "verdict": {"enum": ["match", "no match", "undecided", "none", "similarity"]},
                    "per_group": {"type": "boolean"},
                    "says": _WORD,
                    "examples": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2,
                        "items": {
                            "type": "array",
                            "items": {"type": "string"},
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                },
            },
        },
        "rule_words": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "singular_exceptions": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                },
                "abbreviated": {"type": "object", "additionalProperties": _WORD},
                "edition_words": {"type": "object", "additionalProperties": _PHRASES},
                "number_groups": {"type": "object", "additionalProperties": _WORD},
                "spinal_levels": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["group", "segments"],
                    "properties": {
                        "group": _WORD,
                        "segments": {
                            "type": "object",
                            "propertyNames": {"pattern": "^[a-z]$"},
                            "additionalProperties": _WORD,
                        },
                    },
                },
                "gene_status": {"type": "object", "additionalProperties": _PHRASES},
                **{
                    key: _PHRASES
                    for key in (
                        "numeral_after",
                        "not_codes",
                        "type_words",
                        "type_name_ends",
                        "function_words",
                        "cause_first",
                        "cause_first_not_before",
                        "cause_connectors",
                        "alternative_words",
                        "favour_words",
                        "favour_intensified",
                        "favour_after_comma",
                        "qualifier_clause",
                        "closing_words",
                        "articles",
                        "transformation_words",
                        "syndrome_heads",
                        "genes_without_digit",
                        "lead_in_words",
                        "reference_cause_connectors",
                    )
                },
                **{
                    key: _WORD
                    for key in (
                        "leading_type",
                        "favour_not_before",
                        "favour_intensifier",
                        "favoured_over",
                        "definite_article",
                        "latter",
                        "former",
                        "between",
                        "like",
                        "lesion_in",
                        "other_numbers",
                        "regraded_group",
                        "organism_group",
                    )
                },
            },
        },
    },
}
# Every key of rule_words is needed.
TABLES_SCHEMA["properties"]["rule_words"]["required"] = sorted(
    TABLES_SCHEMA["properties"]["rule_words"]["properties"]
)


def check_tables(tables: Any, path: Path) -> None:
    """The tables' shape (TABLES_SCHEMA), their rules against the matcher's, and every group
    a rule word names: the first problem as a one-line NovaError naming file and key."""
    _check_shape(tables, path)
    _check_rules(tables["rules"], path)
    _check_named_groups(tables, path)


def _where(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path) or "the top level"


def _check_shape(tables: Any, path: Path) -> None:
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(TABLES_SCHEMA).iter_errors(tables)
    )
    if error is None:
        return
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known))
        raise NovaError(
            f"the diagnosis synonym tables {path} have an unknown key {extra[0]!r} in {where}",
            f"remove it or correct its spelling (known keys there: {', '.join(known)})",
        )
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        raise NovaError(
            f"the diagnosis synonym tables {path} lack the key {missing[0]!r} in {where}",
            "add it (diagnosis_synonyms.yaml next to the matcher has every key)",
        )
    raise NovaError(
        f"the diagnosis synonym tables {path} have an invalid value at {where}: "
        f"{' '.join(error.message.split())[:200]}",
        'fix that entry (quote YAML words like "no", "on", "yes")',
    )


def _check_rules(rules: list[dict[str, Any]], path: Path) -> None:
    """Each of the matcher's rules listed once, with the matcher's ``per_group``."""
    listed = [rule["id"] for rule in rules]
    for rule in rules:
        if rule["id"] not in RULE_IDS or listed.count(rule["id"]) > 1:
            problem = "twice" if rule["id"] in RULE_IDS else "and the matcher has no such rule"
            raise NovaError(
                f"the diagnosis synonym tables {path} list the rule {rule['id']!r} {problem}",
                f"list each of the matcher's rules once: {', '.join(RULE_IDS)}",
            )
        if bool(rule.get("per_group")) != RULE_IDS[rule["id"]]:
            raise NovaError(
                f"the rule {rule['id']!r} in {path} has per_group "
                f"{bool(rule.get('per_group'))}, the matcher's {RULE_IDS[rule['id']]}",
                f"set per_group: {str(RULE_IDS[rule['id']]).lower()}",
            )
    for rule_id in RULE_IDS:
        if rule_id not in listed:
            raise NovaError(
                f"the diagnosis synonym tables {path} lack the matcher's rule {rule_id!r}",
                "add it under rules with what it says and one or two examples",
            )


def _check_named_groups(tables: dict[str, Any], path: Path) -> None:
    """The qualifier groups and spinal segments the rule words name exist."""
    groups = tables.get("qualifiers") or {}
    words = tables["rule_words"]
    levels = words["spinal_levels"]
    named = [
        ("spinal_levels.group", levels["group"]),
        ("regraded_group", words["regraded_group"]),
        ("organism_group", words["organism_group"]),
    ]
    for key, group in named:
        if group not in groups:
            raise NovaError(
                f"rule_words.{key} of {path} names the qualifier group {group!r}, "
                "which the qualifiers table lacks",
                "name a group of the qualifiers section, or add the group there",
            )
    values = (groups[levels["group"]] or {}).get("values") or {}
    for letter, segment in levels["segments"].items():
        if segment not in values:
            raise NovaError(
                f"rule_words.spinal_levels.segments.{letter} of {path} names {segment!r}, "
                f"which is no value of the qualifier group {levels['group']!r}",
                f"add {segment!r} to that group's values, or fix the spelling",
            )
