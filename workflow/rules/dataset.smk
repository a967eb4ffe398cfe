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


checkpoint dataset:
    input:
        unpack(dataset_inputs),
    output:
        parquet=DATASET,
        manifest=MANIFEST,
    log:
        "results/logs/dataset/dataset.log",
    benchmark:
        "results/benchmarks/dataset/dataset.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        dataset=config["dataset"],
    script:
        "../../scripts/build_dataset.py"
