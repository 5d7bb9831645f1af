"""Rules fetch_source_*: download one source (resumable, checksummed) and import it into the layout."""

from psp import workflow_config as wc
from psp.sources import SOURCES, fetch_and_import, with_pins
from psp.workflow_runtime import setup

setup(snakemake)
source = with_pins(SOURCES[snakemake.params.source], snakemake.params.sha256)
root = wc.staged_root(snakemake.output.files, source.outputs)
fetch_and_import(
    source,
    root.parent / "downloads",
    root,
    manifest=snakemake.output.manifest,
    url_prefix=snakemake.params.url_prefix,
)
