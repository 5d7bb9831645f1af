"""Rules evaluate_model / evaluate_untrained / evaluate_peer: the paper's tables for one embedder."""

from pathlib import Path

from psp.evaluate import evaluate_embedder
from psp.evaluate.peers import load_embedder
from psp.workflow_runtime import setup

setup(snakemake)
plan = snakemake.params.plan
evaluate_embedder(
    load_embedder(snakemake.params.embedder),
    plan["data_root"],
    Path(snakemake.output.tables).parent,
    sts=plan["sts"],
    sts17_tracks=plan["sts17"],
    tatoeba_langs=plan["tatoeba"],
)
