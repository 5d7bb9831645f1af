"""Rules evaluate_model / evaluate_untrained / evaluate_peer: the paper's tables for one embedder."""

from pathlib import Path

from psp.evaluate import Sts17Evaluator, StsEvaluator, TatoebaEvaluator, evaluate_embedder
from psp.evaluate.harness import eval_files
from psp.evaluate.peers import load_embedder
from psp.evaluate.results import write_rows
from psp.workflow.jobs import staged_root
from psp.workflow.runtime import setup


def embedder_spec(inputs, peer: str | None) -> str:
    """The embedder's spec (psp.evaluate.peers), naming this job's input files: a model or a
    checkpoint is an input like the data, so a storage plugin hands over a local copy."""
    names = inputs.keys()
    if "config" in names:
        return f"psp:{Path(inputs.config).parent}"
    if "checkpoint" in names:
        return f"original:{inputs.checkpoint}:{inputs.spm}"
    if "st_model" in names:
        return f"st:{inputs.st_model}"
    if "peer_card" in names:  # a folder the workflow built: the README.md is at its root
        return f"{peer.partition(':')[0]}:{Path(inputs.peer_card).parent}"
    return peer  # a sentence-transformers model name, looked up in its cache


setup(snakemake)
sets = snakemake.params.eval_sets
evaluate_embedder(
    load_embedder(embedder_spec(snakemake.input, snakemake.params.get("peer"))),
    staged_root(snakemake.input.data, eval_files(Path(), sets)),
    Path(snakemake.output.tables).parent,
    sts=sets["sts"],
    sts17_tracks=sets["sts17"],
    tatoeba_langs=sets["tatoeba"],
)
# Every table is an output: one the sets leave out gets its header and no rows, which
# psp.evaluate.results reads like an absent table.
for evaluator in (StsEvaluator, Sts17Evaluator, TatoebaEvaluator):
    table = Path(getattr(snakemake.output, evaluator.table))
    if not table.exists():
        write_rows(table, evaluator.columns, [])
