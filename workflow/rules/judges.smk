# The judges measured against hand-labelled pairs (validation/): how often
# each configured judge agrees with a human reader. Not part of `all` (an LLM judge costs
# requests): run `snakemake judge_report` or ask for results/judges/report.md.

import os

JUDGE_VALIDATION = Path(workflow.basedir).resolve() / "validation"
# The sets that exist: every diagnosis and caption set, and its second rater's labels
# where there are some (both change the report).
# Relative to the working directory when the workflow is there, so that a moved checkout
# lists the same inputs.
JUDGE_VALIDATION_SETS = sorted(
    os.path.relpath(path) if Path.cwd() in path.parents else str(path)
    for pattern in ("diagnoses*.jsonl", "captions*.jsonl")
    for path in JUDGE_VALIDATION.glob(pattern)
)


rule judge_report:
    input:
        pairs=JUDGE_VALIDATION_SETS,
    output:
        md="results/judges/report.md",
        json="results/judges/report.json",
    log:
        "results/logs/judges/report.log",
    benchmark:
        "results/benchmarks/judges/report.tsv"
    conda:
        "../../envs/scoring.yaml"
    params:
        # The report's code and every configured judge's.
        code=job_code(
            "judge_report",
            judge_kinds=tuple(judge["kind"] for judge in config["judges"].values()),
        ),
        # A cascade's stages written out: the report builds each judge alone.
        judges=inert_param(PLAN.judge_configs()),
        cache="results/cache",
    script:
        "../../scripts/judge_report.py"
