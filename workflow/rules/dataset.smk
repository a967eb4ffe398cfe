# Stage 1: the dataset, as one validated Parquet file whatever the source.


rule sample:
    output:
        "results/dataset/sample/data/nova-v1.parquet",
    log:
        "results/logs/dataset/sample.log",
    benchmark:
        "results/benchmarks/dataset/sample.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        sample=config["dataset"]["sample"],
    script:
        "../../scripts/make_sample.py"


# Outputs flagged `update`: Snakemake keeps the previous dataset while the job runs and
# restores it if the job fails (by default it deletes a job's outputs first).
checkpoint dataset:
    input:
        unpack(dataset_inputs),
    output:
        parquet=update(DATASET),
        manifest=update(MANIFEST),
        tasks=[update(path) for path in TASK_INPUTS.values()],
    log:
        "results/logs/dataset/dataset.log",
    benchmark:
        "results/benchmarks/dataset/dataset.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        dataset=config["dataset"],
        # What each task reads and needs of the dataset (Task.dataset_needs).
        tasks=dataset_needs(),
        # The local source's fingerprint: an edited or re-downloaded file re-runs this job.
        source=dataset_fingerprint,
        # Rater score files of raters no longer in the dataset are removed from here.
        rater_scores="results/scores/localization",
    script:
        "../../scripts/build_dataset.py"
