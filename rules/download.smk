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
        root=lambda wildcards, output: output.manifest.split("/.manifests/")[0],
        downloads=lambda wildcards, output: os.path.join(
            os.path.dirname(output.manifest.split("/.manifests/")[0]), "downloads"
        ),
    script:
        "../workflow_scripts/fetch_source.py"
