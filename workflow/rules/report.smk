# Stage 4: statistics, tables, figures and provenance, from the score files.
#
# Plotting is separate from scoring and statistics: no rule here writes a score, and each
# job's `code` parameter fingerprints the modules it imports, so that editing e.g.
# scripts/novabench/report/figures.py re-runs only the figure jobs. One job per figure
# family, never one per image.


rule statistics:
    input:
        unpack(task_report_inputs),
    output:
        statistics=report(
            results("statistics/{task}.csv"),
            caption="../report/statistics.rst",
            category=report_category,
            subcategory="Statistics",
            labels=lambda wildcards: {"table": f"{wildcards.task} statistics"},
        ),
        # The breakdown figure's numbers, on the same case resamples.
        breakdown=results("statistics/{task}_breakdown.csv"),
        # The breakdown metric per case, for a reader who wants to look case by case.
        cases=results("statistics/{task}_cases.csv"),
    log:
        results("logs/report/statistics/{task}.log"),
    benchmark:
        results("benchmarks/report/statistics/{task}.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("statistics"),
        dataset_label=DATASET_LABEL,
        models=inert_param(REPORT_MODELS),
        reporting=inert_param(REPORT_SETTINGS),
    script:
        "../../scripts/make_statistics.py"


rule tables:
    input:
        unpack(tables_inputs),
        unpack(audit_inputs),
    output:
        tables=report_tables(),
        summary=results("tables/summary.md"),
        reproduced=report(
            results("tables/reproduced_vs_reported.csv"),
            caption="../report/reproduced.rst",
            category="Reproduced vs reported",
            labels={"table": "reproduced vs reported"},
        ),
        reproduced_tex=results("tables/reproduced_vs_reported.tex"),
        reproduced_md=results("tables/reproduced_vs_reported.md"),
    log:
        results("logs/report/tables.log"),
    benchmark:
        results("benchmarks/report/tables.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("tables", tasks=tuple(REPORT_TASKS)),
        dataset_label=DATASET_LABEL,
        agreement=bool(AGREEMENT_JUDGES),
        audits=inert_param(AUDITS),
        # Score files under results/<tag>/ that the tables do not show, named in summary.md.
        left_out=LEFT_OUT,
        limits={
            key: config["reporting"][key] for key in ("min_answered", "max_error_rate")
        },
    script:
        "../../scripts/make_tables.py"


rule leaderboard:
    input:
        unpack(leaderboard_inputs),
    output:
        html=results("leaderboard.html"),
    log:
        results("logs/report/leaderboard.log"),
    benchmark:
        results("benchmarks/report/leaderboard.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("leaderboard", tasks=tuple(REPORT_TASKS)),
        # The page shows the commit, so a new commit re-writes it.
        git=inert_param(GIT_STATE),
        left_out=LEFT_OUT,
        # When a model is marked for failures, as in the tables.
        limits={
            key: config["reporting"][key] for key in ("min_answered", "max_error_rate")
        },
    script:
        "../../scripts/make_leaderboard.py"


rule figure_metrics:
    input:
        # Names the dataset on figures that are not of the full NOVA release.
        dataset_manifest=MANIFEST,
        statistics=results("statistics/{task}.csv"),
    output:
        png=report(
            results("figures/{task}_metrics.png"),
            caption="../report/metrics.rst",
            category=report_category,
            subcategory="Figures",
            labels={"figure": "metrics with 95% CIs", "models": "all"},
        ),
        pdf=results("figures/{task}_metrics.pdf"),
    log:
        results("logs/report/figure_metrics/{task}.log"),
    benchmark:
        results("benchmarks/report/figure_metrics/{task}.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("figure"),
        dataset_label=DATASET_LABEL,
        caption=task_caption("metrics"),
        family="metrics",
        task=lambda wildcards: wildcards.task,
        models=inert_param(REPORT_MODELS),
        reporting=inert_param(REPORT_SETTINGS),
    script:
        "../../scripts/make_figures.py"


rule figure_breakdown:
    input:
        dataset_manifest=MANIFEST,
        table=results("statistics/{task}_breakdown.csv"),
    output:
        png=report(
            results("figures/{task}_breakdown_{axis}.png"),
            caption="../report/breakdown.rst",
            category=report_category,
            subcategory="Figures",
            labels=lambda wildcards: {
                "figure": f"by {wildcards.axis}",
                "models": "all",
            },
        ),
        pdf=results("figures/{task}_breakdown_{axis}.pdf"),
    log:
        results("logs/report/figure_breakdown/{task}_{axis}.log"),
    benchmark:
        results("benchmarks/report/figure_breakdown/{task}_{axis}.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("figure"),
        dataset_label=DATASET_LABEL,
        caption=task_caption("breakdown"),
        family="breakdown",
        task=lambda wildcards: wildcards.task,
        axis=lambda wildcards: wildcards.axis,
        models=inert_param(REPORT_MODELS),
        reporting=inert_param(REPORT_SETTINGS),
    script:
        "../../scripts/make_figures.py"


rule figure_task:
    input:
        unpack(task_report_inputs),
        dataset_manifest=MANIFEST,
    output:
        png=report(
            results("figures/{task}_{family}.png"),
            caption="../report/task_figures.rst",
            category=report_category,
            subcategory="Figures",
            labels=lambda wildcards: {
                "figure": wildcards.family.replace("_", " "),
                "models": "all",
            },
        ),
        pdf=results("figures/{task}_{family}.pdf"),
    log:
        results("logs/report/figure_task/{task}_{family}.log"),
    benchmark:
        results("benchmarks/report/figure_task/{task}_{family}.tsv")
    wildcard_constraints:
        family="|".join(
            sorted({f for fs in TASK_FIGURES.values() for f in fs}) or ["none"]
        ),
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("task_figure"),
        dataset_label=DATASET_LABEL,
        caption=task_caption(),
        family=lambda wildcards: wildcards.family,
        task=lambda wildcards: wildcards.task,
        models=inert_param(REPORT_MODELS),
        reporting=inert_param(REPORT_SETTINGS),
    script:
        "../../scripts/make_figures.py"


rule manifest:
    input:
        unpack(manifest_inputs),
    output:
        manifest=report(
            results("manifest.json"),
            caption="../report/manifest.rst",
            category="Provenance",
            labels={"file": "manifest"},
        ),
    log:
        results("logs/report/manifest.log"),
    conda:
        "../../envs/reporting.yaml"
    params:
        code=manifest_code,
        config=inert_param(config),
        git=inert_param(GIT_STATE),
    script:
        "../../scripts/make_manifest.py"


rule judge_agreement:
    input:
        unpack(agreement_inputs),
    output:
        table=report(
            results("tables/judge_agreement.csv"),
            caption="../report/judge_agreement.rst",
            category="Judge agreement",
            labels={"table": "Cohen's kappa", "models": "all"},
        ),
        md=results("tables/judge_agreement.md"),
    log:
        results("logs/report/judge_agreement.log"),
    benchmark:
        results("benchmarks/report/judge_agreement.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("agreement", tasks=tuple(AGREEMENT_JUDGES)),
        dataset_label=DATASET_LABEL,
        # Judge names, the task's own first: the order of each pair's columns.
        judges=inert_param(AGREEMENT_JUDGES),
    script:
        "../../scripts/make_agreement.py"


rule figure_judge_agreement:
    input:
        dataset_manifest=MANIFEST,
        table=results("tables/judge_agreement.csv"),
    output:
        png=report(
            results("figures/judge_agreement.png"),
            caption="../report/judge_agreement.rst",
            category="Judge agreement",
            labels={"figure": "Cohen's kappa", "models": "all"},
        ),
        pdf=results("figures/judge_agreement.pdf"),
    log:
        results("logs/report/figure_judge_agreement.log"),
    benchmark:
        results("benchmarks/report/figure_judge_agreement.tsv")
    conda:
        "../../envs/reporting.yaml"
    params:
        code=job_code("figure"),
        dataset_label=DATASET_LABEL,
        family="judge_agreement",
        task=None,
        models=inert_param(REPORT_MODELS),
        reporting=inert_param(REPORT_SETTINGS),
    script:
        "../../scripts/make_figures.py"
