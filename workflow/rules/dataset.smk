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
        sample=config["dataset"]["sample"],
    script:
        "../../scripts/make_sample.py"


checkpoint dataset:
    input:
        unpack(dataset_inputs),
    output:
        parquet=FULL_DATASET,
        manifest=FULL_MANIFEST,
    log:
        results("logs/dataset/dataset.log", FULL_TAG),
    benchmark:
        results("benchmarks/dataset/dataset.tsv", FULL_TAG)
    conda:
        "../../envs/data.yaml"
    params:
        # Not the subset: choosing another subset re-uses the built dataset.
        dataset={k: v for k, v in config["dataset"].items() if k != "subset"},
    script:
        "../../scripts/build_dataset.py"


if SUBSET:

    checkpoint subset:
        input:
            parquet=FULL_DATASET,
            manifest=FULL_MANIFEST,
        output:
            parquet=DATASET,
            manifest=MANIFEST,
        log:
            results("logs/dataset/subset.log"),
        conda:
            "../../envs/data.yaml"
        params:
            subset=SUBSET,
            tag=TAG,
        script:
            "../../scripts/make_subset.py"
