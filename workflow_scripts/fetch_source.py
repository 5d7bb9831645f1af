"""Rules fetch_source_*: download one source (resumable, checksummed) and import it into the layout."""

from psp.data.sources import SOURCES, fetch_and_import, with_pins
from psp.workflow import jobs
from psp.workflow.runtime import setup

setup(snakemake)
source = with_pins(SOURCES[snakemake.params.source], snakemake.params.sha256)
root = jobs.staged_root(snakemake.output.files, source.outputs)
fetch_and_import(
    source,
    root.parent / "downloads",
    root,
    manifest=snakemake.output.manifest,
    url_prefix=snakemake.params.url_prefix,
)
