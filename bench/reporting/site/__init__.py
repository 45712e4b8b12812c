"""`bench report --format html`: the report as a static site that opens from disk, with no server and
no network (no CDN: the script and the style sheet lie beside the pages).

    <report>/index.html      leaderboards per split (sortable, filterable), the paper comparison, curves
                             per dataset and split (inline SVG, seed bands), radar plots (the report's
                             PNGs), the paper's table layouts, the mixed setting's (cgcd) table, every
                             run with its state
    <report>/site.css, site.js
    <report>/runs/<id>.html  one page per run: config, provenance, per-step metrics in every flavour,
                             the end of its log (and its error), links to its files

Every text that comes from a run (labels, configuration values, logs, error messages, paths) is
escaped; the only markup is this package's. Runs that failed, are unfinished or never ran are shown
with their state, never as an empty cell.

The parts, none importing a later one (no cycles):

    html     escaping (`e`), numbers, key-value tables, anchors, the page skeleton
    runs     the `Run` record, `collect_runs` and its states, page names, state badges, run links
    tables   leaderboards and filters, the paper comparison, paired differences, the cgcd section,
             the paper's layouts
    charts   SVG curves (`svg_curves`) and the radar figures
    statistics  the statistics section: ranks, tests, critical-difference diagrams, corrected comparisons
    pages    one page per run (`run_page`)
    build    `write_site`: the index, the assets, the run pages

What it may import: pandas, its `bench.reporting.*` siblings, `bench.core.storage` for atomic writes and,
lazily, `bench.config.spec` to read back the spec.json of a run the report has no spec for; nothing from
runs, protocol or execution. The static assets stay in `bench/reporting/site_assets/`."""
from __future__ import annotations

from bench.reporting.site.build import ASSETS, write_site
from bench.reporting.site.charts import svg_curves
from bench.reporting.site.html import e
from bench.reporting.site.pages import LOG_LINES, MEASURES, PROVENANCE, Measure, run_page
from bench.reporting.site.runs import (DONE, FAILED, NOT_RUN, STATE_HELP, UNFINISHED, UNREADABLE, Run,
                                      collect_runs)
from bench.reporting.site.tables import REFERENCE_MARK

# the public names of the single module this package replaced: `site.X` keeps working for each of them
# (`from bench.reporting.site import write_site` is how bench.reporting.pipeline calls it; benchmarks/report_site.py
# replaces `site.write_site` to time it, which the pipeline's import at call time then picks up)
__all__ = ["ASSETS", "DONE", "FAILED", "LOG_LINES", "MEASURES", "Measure", "NOT_RUN", "PROVENANCE",
           "REFERENCE_MARK", "Run", "STATE_HELP", "UNFINISHED", "UNREADABLE", "collect_runs", "e", "run_page",
           "svg_curves", "write_site"]
