"""Rule init_untrained: the random-piece-embedding floor every trained model must clear.

It must tokenise as the trained model does, so it takes the same ``max_pieces``: the trained
model's is ``train.max_pieces`` (TrainConfig), which is also what encode_hdf5 stores in the HDF5
attributes the trainer falls back to.
"""

from pathlib import Path

from psp.model.torch_model import PSPModel
from psp.train import TrainConfig
from psp.workflow.runtime import setup

setup(snakemake)
cfg = TrainConfig.from_dict(snakemake.params.train)
model = PSPModel.from_spm(
    snakemake.input.spm,
    dim=cfg.dim,
    seed=cfg.seed,
    languages=snakemake.params.languages,
    max_pieces=cfg.max_pieces,
    provenance={"untrained": True, "note": "random piece embeddings, the evaluation floor"},
)
model.save(Path(snakemake.output.config).parent)
