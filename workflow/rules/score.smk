# Stage 3b: the benchmark's metrics, one job per (task, model) from the verdicts of the
# task's judge (no judge runs here), and per human rater.


rule score:
    input:
        unpack(task_dataset),
        unpack(verdict_inputs),
        # The judges' held-out figures, recorded in each judged score file: editing the
        # record re-scores the judged tasks only.
        judge_figures=judge_figures,
    output:
        scores=results("scores/{task}/{model}.json"),
        per_image=results("scores/{task}/{model}.images.csv"),
    log:
        results("logs/score/{task}/{model}.log"),
    benchmark:
        results("benchmarks/score/{task}/{model}.tsv")
    conda:
        "../../envs/scoring.yaml"
    params:
        code=job_code("score"),
        options=score_options,
        # A control's bounds: outside them the judge is broken or steered, and scoring stops.
        control=control_bounds,
        nltk_data="results/nltk_data",
    script:
        "../../scripts/score.py"


rule score_rater:
    input:
        dataset=DATASET,
    output:
        scores=results("scores/{task}/rater-{rater}.json"),
        per_image=results("scores/{task}/rater-{rater}.images.csv"),
    log:
        results("logs/score/{task}/rater-{rater}.log"),
    wildcard_constraints:
        task="|".join(RATER_TASKS) or "(?!)",
    conda:
        "../../envs/scoring.yaml"
    params:
        code=job_code("score_rater"),
    script:
        "../../scripts/score_rater.py"
