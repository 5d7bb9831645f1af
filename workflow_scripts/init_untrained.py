"""Rule init_untrained: the random-piece-embedding floor every trained model must clear."""

from pathlib import Path

from psp.model import PSPModel
from psp.train import TrainConfig
from psp.workflow_runtime import setup

setup(snakemake)
cfg = TrainConfig.from_dict(snakemake.params.train)
model = PSPModel.from_spm(
    snakemake.input.spm,
    dim=cfg.dim,
    seed=cfg.seed,
    languages=snakemake.params.languages,
    provenance={"untrained": True, "note": "random piece embeddings, the evaluation floor"},
)
model.save(Path(snakemake.output.config).parent)
