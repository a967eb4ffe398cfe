# Stage 2: one job per (task, model) writes results/<tag>/predictions/{task}/{model}.jsonl.


rule predict:
    input:
        unpack(predict_inputs),
    output:
        predictions=results("predictions/{task}/{model}.jsonl"),
        summary=results("predictions/{task}/{model}.summary.json"),
    log:
        results("logs/predict/{task}/{model}.log"),
    benchmark:
        results("benchmarks/predict/{task}/{model}.tsv")
    conda:
        predict_env
    resources:
        **api_resources("models"),
        # GPUs of a local VLM or a managed vLLM server (0 for other models): the SLURM
        # executor asks for --gpus=N; `--resources gpu=1` on a workstation runs one such
        # job at a time. CPUs and host memory (MB) for a cluster job, sized per model
        # (novabench.config.Plan.predict_resources).
        gpu=predict_resource("gpu"),
        cpus_per_task=predict_resource("cpus"),
        mem_mb=predict_resource("mem_mb"),
    params:
        code=job_code("predict"),
        # Without its `info` block: a new price or date re-runs nothing.
        model=lambda wildcards: inert_param(predict_params(PLAN.model(wildcards.model))),
        cache_dir="results/cache",
    script:
        "../../scripts/predict.py"


# `snakemake --cores 4 predictions`: every pending prediction job and what it needs (the
# dataset, a subset), nothing after it; for submit hosts that have the internet when the
# compute nodes do not. Snakemake's `--until predict` would drop the prediction jobs once
# the dataset checkpoint re-plans the DAG.
rule predictions:
    input:
        prediction_targets,
