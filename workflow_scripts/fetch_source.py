"""Rule fetch_source: download one source (resumable, checksummed) and import it into the layout."""

from psp.sources import SOURCES, fetch_and_import
from psp.workflow_runtime import setup

setup(snakemake)
fetch_and_import(
    SOURCES[snakemake.params.source],
    snakemake.params.downloads,
    snakemake.params.root,
    snakemake.output.manifest,
)
