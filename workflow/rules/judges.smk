# The judges measured against hand-labelled pairs (validation/): how often
# each configured judge agrees with a human reader. Not part of `all` (an LLM judge costs
# requests): run `snakemake judge_report` or ask for results/judges/report.md.

JUDGE_VALIDATION = Path(workflow.basedir) / "validation"
# The sets that exist: every diagnosis set, its second rater's labels where there are
# some (both change the report), and the caption set.
JUDGE_VALIDATION_SETS = sorted(
    str(path)
    for pattern in ("diagnoses*.jsonl", "captions.jsonl")
    for path in JUDGE_VALIDATION.glob(pattern)
)


rule judge_report:
    input:
        pairs=JUDGE_VALIDATION_SETS,
        code=[
            str(Path(workflow.basedir) / "scripts" / "judge_report.py"),
            str(Path(workflow.basedir) / "scripts/novabench/judges/validation.py"),
        ],
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
        code=job_code("judge_report"),
        judges=config["judges"],
        cache="results/cache",
    script:
        "../../scripts/judge_report.py"
