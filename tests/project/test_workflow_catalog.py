"""The Snakemake workflow catalog's file (.snakemake-workflow-catalog.yml): its schema, and
that what it claims holds (conda environments exist, the report exists, the flags are the
README's, the configuration reference it points to is there)."""

from __future__ import annotations

import re

import yaml

from support import ROOT

CATALOG = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text(encoding="utf-8"))
RULES = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "workflow").rglob("*.smk"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_only_the_keys_the_catalog_reads():
    assert set(CATALOG) == {"usage"}
    usage = CATALOG["usage"]
    assert set(usage) <= {"mandatory-flags", "software-stack-deployment", "report"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"}
    deployment = usage["software-stack-deployment"]
    assert set(deployment) == {"conda", "singularity", "singularity+conda"}
    assert any(deployment.values())  # the catalog needs at least one method


def test_conda_deployment_every_rule_environment_exists():
    assert CATALOG["usage"]["software-stack-deployment"]["conda"] is True
    environments = re.findall(r'^\s+conda:\s*\n\s+"([^"]+)"', RULES, re.M)
    assert len(environments) >= 10
    for environment in environments:
        assert (ROOT / "workflow" / "rules" / environment).resolve().is_file(), environment
    assert "--sdm conda" in README
    # No container is named: singularity is claimed only once a rule names one.
    assert not CATALOG["usage"]["software-stack-deployment"]["singularity"]
    assert "container:" not in RULES


def test_report_flags_and_configuration_reference():
    assert CATALOG["usage"]["report"] is True
    assert "report(" in RULES and "snakemake --report" in README
    # The README's first command runs the workflow with the catalog's flags.
    first = re.search(r"```bash\n(.*?)\n```", README, re.S).group(1)
    assert CATALOG["usage"]["mandatory-flags"]["flags"] in first
    assert "config/README.md" in CATALOG["usage"]["mandatory-flags"]["desc"]
    assert (ROOT / "config" / "README.md").is_file()
