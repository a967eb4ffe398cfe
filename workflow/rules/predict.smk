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
    # A model's prediction jobs run together with its shared server (a service group,
    # summed): as clients they claim no core, so `--cores 1` runs a model of three tasks.
    threads: lambda wildcards: 0 if wildcards.model in SERVED_MODELS else 1
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


# One server per model for all its tasks (novabench.serving): a service job that Snakemake
# runs together with the model's prediction jobs (one group, on a cluster one allocation)
# and ends after the last of them. It holds the GPUs, CPUs and memory the model needs.
rule serve_model:
    output:
        service=service(results("servers/{model}.json")),
    log:
        results("logs/serve/{model}.log"),
    wildcard_constraints:
        model="|".join(re.escape(m) for m in SERVED_MODELS) or "(?!)",
    conda:
        predict_env
    threads: 0  # it waits on its server; the prediction jobs beside it take the cores
    resources:
        gpu=serve_resource("gpu"),
        cpus_per_task=serve_resource("cpus"),
        mem_mb=serve_resource("mem_mb"),
    params:
        python=SERVICE_PYTHON,
        script=Path(workflow.basedir) / "scripts" / "serve.py",
        settings=lambda wildcards: json.dumps(
            predict_params(PLAN.model(wildcards.model))
        ),
        plugins=json.dumps(config.get("plugins") or []),
    # A shell command, exec'd: Snakemake ends a service job by signalling it.
    shell:
        "exec {params.python:q} {params.script:q} --model {wildcards.model:q} "
        "--settings {params.settings:q} --service {output.service:q} "
        "--cache-dir results/cache --log {log:q} --plugins {params.plugins:q}"


# `snakemake --cores 4 predictions`: every pending prediction job and what it needs (the
# dataset, a subset), nothing after it; for submit hosts that have the internet when the
# compute nodes do not. Snakemake's `--until predict` would drop the prediction jobs once
# the dataset checkpoint re-plans the DAG.
rule predictions:
    input:
        prediction_targets,
