# The NOVA brain-MRI benchmark, end to end: dataset -> predictions -> scores.
#
#   snakemake --cores 8                        # the embedded sample, offline
#   snakemake --cores 8 --configfile my.yaml   # another dataset source or model set
#
# Rules live in workflow/rules/ by stage; the logic they call lives in the Python
# package scripts/novabench/.

from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# Relative to the workflow, so `snakemake -d WORKDIR` finds it from anywhere.
configfile: Path(workflow.basedir) / "config" / "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/dataset.smk"
include: "workflow/rules/predict.smk"
include: "workflow/rules/read.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/judges.smk"


onstart:
    check_run_environment()


rule all:
    default_target: True
    input:
        all_targets,
        human_reference_targets,
        report_targets,
