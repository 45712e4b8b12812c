"""`bench report`: tables and plots of finished runs (bench.api.report behind the options)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.cli.common import add_selection, selection
from bench.core.provenance import VERSION_COLUMNS


def add_parser(sub: Any) -> None:
    rep = sub.add_parser("report", help="tables and plots of a grid's finished runs")
    add_selection(rep, "default: every finished run under the results root")
    rep.set_defaults(grid=None)  # no grid named: every finished run under the results root
    rep.add_argument("--format", action="extend", nargs="+", choices=("latex", "markdown", "csv", "html"),
                     help="latex, markdown, csv, or html (a static site: index.html, one page per run); several "
                          "after one --format or each after its own (default: latex and html)")
    rep.add_argument("--out", type=Path, help="output directory (default: <results>/reports/<grid>, "
                     "or <results>/reports/all without --grid)")
    rep.add_argument("--pool-orders", action="store_true",
                     help="average runs of different class orders (split.class_order_seed) together, with the seeds")
    rep.add_argument("--by", choices=VERSION_COLUMNS, metavar="COLUMN",
                     help="split every row by a version column of the runs (one of: %(choices)s), so that runs "
                          "of different versions are never averaged together")
    rep.add_argument("--compare", nargs="+", metavar="WHAT",
                     help="paper: the paper's numbers beside the measured ones; happy, promptccd or vb-cgcd: that "
                          "mixed-setting peer's published main tables beside the measured cells; A B: the paired "
                          "difference of two methods over the seeds they share, each a name or slug as --methods "
                          "takes it (baseline-pp, ewc:equations) or a label as the tables show it. The peers are "
                          "methods too: one name alone is the peer's tables, two names are two methods "
                          "(--compare vb-cgcd k-means)")
    rep.add_argument("--store", type=Path, metavar="PATH",
                     help="a results store's checkout: the runs beside its entries on the same protocol, with the "
                          "paired image bootstrap from both predictions (store_comparison.md; docs/results-store.md)")
    # the statistics part (stats.*, cd_*.png, the site's Statistics section): docs/metrics.md#statistics
    rep.add_argument("--posthoc", choices=("nemenyi", "wilcoxon-holm"), default="nemenyi",
                     help="the post-hoc test of the average ranks and their critical-difference diagram: nemenyi "
                          "(every pair, one critical difference) or wilcoxon-holm (Wilcoxon's signed-rank test per "
                          "pair over the blocks, corrected as --correction says; default: %(default)s)")
    rep.add_argument("--correction", choices=("holm", "bh"), default="holm",
                     help="how the p-values of the paired comparisons (stats.*) and of the tables' daggers (each "
                          "bold value against its runner-up) are corrected for their number: holm (the chance of "
                          "any false mark) or bh (Benjamini-Hochberg: the share of false marks; default: %(default)s)")
    rep.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                     help="resamples of each bootstrap: the ranks' intervals and the paired test-image x seed "
                          "bootstrap from stored predictions (0: no image bootstrap; default: %(default)s)")


def command(args: argparse.Namespace) -> int:
    from bench.api import DEFAULT_REPORT_FORMATS, report

    report(selection(args), format=args.format or DEFAULT_REPORT_FORMATS, out=args.out, pool_orders=args.pool_orders,
           by=args.by, compare=args.compare, store=args.store,
           statistics=dict(posthoc=args.posthoc, correction=args.correction, resamples=args.bootstrap))
    return 0
