"""The run's report: every paper table for every model beside its untrained floor and the
peers, with the training curves and mining results (``results/report.md``), the same tables as
the results page (``results/results.md``, copied to ``docs/results.md``) and every score as one
tidy CSV.

- :mod:`psp.report.stage_tables`: the tables of the data, mining and speed stages (Tables 1, 1b,
  mining quality, 5); Tables 2-4 come from :mod:`psp.evaluate.paper_tables`, as in an
  evaluation's ``tables.md``;
- :mod:`psp.report.figures`: the speed-quality plot and the sections showing other rules'
  figures (learning curves, score histograms, mined samples);
- :mod:`psp.report.pages`: the report, the results page and the CSV.
"""

from __future__ import annotations

from psp.report.pages import ReportInputs, write_report

__all__ = ["ReportInputs", "write_report"]
