# Without a mirror, every source is downloaded from its upstream URL (resumable, checksummed)
# and imported into the mirror layout under results/sources/. One rule per source: each
# imports its own set of files, and every one of them is an output.
#
# The raw downloads go to results/downloads/ beside the imported data, and are not outputs:
# Snakemake deletes a failed job's outputs, and a partial download must survive for the rerun
# to resume it. Under a storage plugin they stay in the job's local copy of results/. A set only
# a mirror provides has a rule too, whose input function stops the DAG naming the fix.
# `source_url_prefix` fetches every file from an HTTP mirror of the upstream hosts instead, and
# `source_sha256` adds or replaces pins (docs/data.md).

if not MIRROR:
    for _source in SOURCES.values():

        rule:
            name:
                rule_name("fetch_source", _source.id)
            input:
                get_fetch_inputs(_source.id),
            output:
                manifest=f"results/sources/.manifests/{_source.id}.json",
                files=[f"results/sources/{out}" for out in _source.outputs],
            log:
                f"results/logs/fetch_source/{_source.id}.log",
            conda:
                "../envs/psp.yaml"
            resources:
                downloads=1,
            params:
                source=_source.id,
                url_prefix=config["source_url_prefix"],
                sha256=config["source_sha256"],
            script:
                "../workflow_scripts/fetch_source.py"
