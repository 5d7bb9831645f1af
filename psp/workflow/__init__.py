"""The Snakemake workflow's side of the package: what ``rules/*.smk`` and the scripts in
``workflow_scripts/`` call, kept here so it is tested like the rest. Nothing here imports
Snakemake.

- :mod:`~psp.workflow.jobs`: config to job parameters, what each job reads and takes;
- :mod:`~psp.workflow.checks`: which config files make the run, and what the Snakefile refuses
  of a config before it plans a job;
- :mod:`~psp.workflow.runtime`: what every workflow script does first;
- :mod:`~psp.workflow.train_job`: a training job, as one process or as several ranks.
"""
