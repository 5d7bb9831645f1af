"""Rule encode_hdf5: clean pairs → shuffled piece ids in the HDF5 training layout."""

from psp.data.pairs_store import write_pairs
from psp.workflow.runtime import setup

setup(snakemake)
write_pairs(
    snakemake.input.pairs,
    snakemake.input.spm,
    snakemake.output.h5,
    languages=tuple(snakemake.params.languages),
    max_pieces=snakemake.params.max_pieces,
    num_threads=snakemake.threads,
)
