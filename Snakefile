# psp-mine: train P-SP sentence embeddings and mine bitext with Faiss.
# Table of contents only; all Python lives in rules/common.smk.

import os

from snakemake.utils import min_version

from psp.workflow.checks import replaces_default_config

min_version("9.0")


# The default run, config.yaml, sits next to this file (`--directory elsewhere` still finds it).
# A --configfile that names its own `models` (configs/paper.yaml) is a whole run and replaces it;
# one without (configs/compare_losses.yaml) is an overlay on it.
if not replaces_default_config(workflow.overwrite_configfiles):

    configfile: os.path.join(workflow.basedir, "config.yaml")


report: "report/workflow.rst"


include: "rules/common.smk"


# Wildcards only match configured names (see rules/common.smk for the tables).
wildcard_constraints:
    model=_alternatives(MODELS),
    pair=_alternatives(MINE_PAIRS),
    bucc=_alternatives(BUCC_PAIRS),
    peer=_alternatives(PEERS),
    side="src|tgt",
    shard=r"\d+",
    src_shard=r"\d+",
    tgt_shard=r"\d+",
    source=r"[\w.-]+",


include: "rules/download.smk"
include: "rules/prepare.smk"
include: "rules/sentencepiece.smk"
include: "rules/hdf5.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/mine.smk"
include: "rules/speed.smk"
include: "rules/export.smk"
include: "rules/report.smk"
include: "rules/compare_losses.smk"
include: "rules/targets.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
        expand("results/spm/{model}.stats.json", model=MODELS),
    localrule: True
