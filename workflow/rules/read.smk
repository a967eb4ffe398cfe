# Stage 3a: one job per (task, judge, model) reads a prediction file (statuses, refusals
# in the text, the task's parser) and judges the answers, writing
# results/<tag>/verdicts/{task}/{judge}/{model}.jsonl. `{judge}` is a judge's config
# name, or the task's reader name for a task without a judge (localization: boxes).


rule read:
    input:
        unpack(task_dataset),
        predictions=results("predictions/{task}/{model}.jsonl"),
        # An LLM judge's prompt: editing it re-reads (nothing for offline judges).
        judge=judge_inputs,
    output:
        verdicts=results("verdicts/{task}/{judge}/{model}.jsonl"),
        summary=results("verdicts/{task}/{judge}/{model}.summary.json"),
    log:
        results("logs/read/{task}/{judge}/{model}.log"),
    benchmark:
        results("benchmarks/read/{task}/{judge}/{model}.tsv")
    wildcard_constraints:
        # Models of earlier runs too: an agreement judge reads their predictions.
        task=READ_TASK,
        model=READ_MODEL,
    conda:
        "../../envs/scoring.yaml"
    resources:
        # An LLM judge's endpoint counts against `api_<provider>` like a model's.
        **api_resources("judges"),
        # An open-weight judge the job serves itself holds its server's GPUs.
        gpu=read_resource("gpu"),
        cpus_per_task=read_resource("cpus"),
        mem_mb=read_resource("mem_mb"),
    params:
        code=job_code("read"),
        judge=reading_judge,
        options=reading_options,
        cache_dir="results/cache",
    script:
        "../../scripts/read.py"
