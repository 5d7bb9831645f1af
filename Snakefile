# psp-mine: train P-SP sentence embeddings and mine bitext with Faiss.
# Table of contents only; all Python lives in rules/common.smk.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/prepare.smk"
include: "rules/sentencepiece.smk"
include: "rules/hdf5.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/mine.smk"
include: "rules/report.smk"
include: "rules/targets.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
    localrule: True
