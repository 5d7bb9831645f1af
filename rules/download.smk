# Without a mirror, every source is downloaded from its upstream URL (resumable, checksummed)
# and imported into the mirror layout under results/sources/.


rule fetch_source:
    output:
        manifest="results/sources/.manifests/{source}.json",
    log:
        "results/logs/fetch_source/{source}.log",
    conda:
        "../envs/psp.yaml"
    resources:
        downloads=1,
    params:
        source="{source}",
        root=get_source_root,
        downloads=get_download_root,
    script:
        "../workflow_scripts/fetch_source.py"
