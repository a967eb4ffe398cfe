# Stage 1: the dataset, as one validated Parquet file whatever the source; a configured
# subset is cut from it into the run's own results folder.


rule sample:
    output:
        SAMPLE_SOURCE,
    log:
        "results/sources/logs/sample.log",
    benchmark:
        "results/sources/benchmarks/sample.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        code=job_code("sample"),
        sample=config["dataset"]["sample"],
    script:
        "../../scripts/make_sample.py"


# Outputs flagged `update`: Snakemake keeps the previous dataset while the job runs and
# restores it if the job fails (by default it deletes a job's outputs first).
checkpoint dataset:
    input:
        unpack(dataset_inputs),
    output:
        parquet=update(FULL_DATASET),
        manifest=update(FULL_MANIFEST),
        tasks=[update(path) for path in FULL_TASK_INPUTS.values()],
    log:
        results("logs/dataset/dataset.log", FULL_TAG),
    benchmark:
        results("benchmarks/dataset/dataset.tsv", FULL_TAG)
    conda:
        "../../envs/data.yaml"
    params:
        code=job_code("dataset"),
        # Not the subset: choosing another subset re-uses the built dataset.
        dataset=inert_param(
            {k: v for k, v in config["dataset"].items() if k != "subset"}
        ),
        # What each task reads and needs of the dataset (Task.dataset_needs).
        tasks=dataset_needs(),
        # The local source's fingerprint: an edited or re-downloaded file re-runs this job.
        source=dataset_fingerprint,
        # Rater score files of raters no longer in the dataset are removed from here.
        rater_scores=[results(f"scores/{task}", FULL_TAG) for task in RATER_TASKS],
    script:
        "../../scripts/build_dataset.py"


if SUBSET:

    checkpoint subset:
        input:
            parquet=FULL_DATASET,
            manifest=FULL_MANIFEST,
        output:
            parquet=update(DATASET),
            manifest=update(MANIFEST),
            tasks=[update(path) for path in TASK_INPUTS.values()],
        log:
            results("logs/dataset/subset.log"),
        conda:
            "../../envs/data.yaml"
        params:
            code=job_code("subset"),
            subset=inert_param(SUBSET),
            tag=TAG,
            tasks=dataset_needs(),
            rater_scores=[results(f"scores/{task}") for task in RATER_TASKS],
        script:
            "../../scripts/make_subset.py"
