"""The published tables bench ships (`results/paper/`: the paper's class-iNCD tables, Happy's, PromptCCD's and
VB-CGCD's) as the store's `claimed` entries, each cell with its protocol card, and `bench store init`: a ready store
(its mark, those tables, a CI workflow that runs `bench store verify` on every pull request, a README).

A card says what makes two published numbers of one method differ: the metric's definition (a stage's All, a mean
over stages), K known or estimated, how the epoch was selected (on the test set or not), the seeds, the backbone, and
who reported the number (the method's own paper, or another paper's re-run or copy). Where a paper does not say,
the card says `not stated`."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from bench.core.resources import VERSION
from bench.reporting.compare import DATASETS, METHODS, PAPER_DIR
from bench.reporting.peers import COPIED_FROM_HAPPY, PEERS, SHORT, peer_reference
from bench.splits.settings import MIXED_SPLITS
from bench.store.layout import CLAIMED, STORE_FORMAT, STORE_MARK, WORKFLOW, dump

CARD = ["metric_definition", "stages", "labelled_fraction", "selection", "selection_on_test", "seeds", "reported_by"]
CLAIM_COLUMNS = ["paper", "table", "row", "column", "value", "label", "dataset", "split", "backbone", "k",
                 "evaluation", "step", "group", "flavour", "metric", *CARD, "source", "note"]
# what each paper's text and code say of how its numbers were selected and seeded (docs/settings.md, docs/methods.md)
PEER_CARDS: Mapping[str, Mapping[str, str]] = {
    "happy": {"selection": "each session's best epoch by its accuracy on the test set (Happy's code)",
              "selection_on_test": "yes", "seeds": "not stated (its code sets no seed)"},
    "promptccd": {"selection": "every 10th epoch, the best old-class k-means accuracy on the test set (PromptCCD's "
                               "code)", "selection_on_test": "yes", "seeds": "not stated"},
    "vb-cgcd": {"selection": "not stated", "selection_on_test": "not stated", "seeds": "1 (every seed 0)"},
}
PAPER = "Liu et al., Large-scale Pre-trained Models are Surprisingly Strong in Incremental Novel Class Discovery"
PAPER_TABLES = {"table2_reference_methods.csv": "Table 2", "table5_sota_comparison.csv": "Table 5",
                "appendix_table_cassle.csv": "Appendix, CaSSLe"}
PAPER_OWN = ("Baseline", "Baseline++")  # the paper's own methods; its other rows are its re-runs


GROUPS = {"all": "All", "old": "Old", "new": "New"}
OLD_SENSE = {"cgcd_hard": " (Old: the labelled classes)", "cgcd_soft": " (Old: every earlier stage's classes)"}


def metric_definition(step: str, group: str, flavour: str, metric: str, column: str) -> str:
    """What a published cell measures, in the same words for every paper (so that a method's page can say which
    of its numbers measure different things): a stage's All/Old/New, or a summary over the stages."""
    if step.isdigit():
        return f"stage {step} {GROUPS.get(group, group)}{OLD_SENSE.get(flavour, '')}, one Hungarian match"
    if step == "summary":
        return f"{metric}: a summary over the stages (see the note)"
    return f"{column}: not a metric bench computes"


def peer_claims(name: str) -> dict[str, pd.DataFrame]:
    """The peer's tables as claimed tables, by file stem (`table1`), each cell with its card."""
    table = peer_reference(name)
    card = PEER_CARDS[name]
    stages = table["split"].map(lambda s: str(MIXED_SPLITS[s].steps + 1) if s in MIXED_SPLITS else "not in bench")
    labelled = table["split"].map(lambda s: str(MIXED_SPLITS[s].counts.get("labelled_fraction", "")) or "not stated"
                                  if s in MIXED_SPLITS else "not stated")
    own = table["label"] == SHORT[name]
    copied = table["label"].isin(COPIED_FROM_HAPPY.get(name, ()))
    table = table.assign(
        metric_definition=[metric_definition(*cell) for cell in table[["step", "group", "flavour", "metric", "column"]]
                           .itertuples(index=False, name=None)],
        stages=stages, labelled_fraction=labelled, selection=card["selection"],
        selection_on_test=card["selection_on_test"], seeds=card["seeds"],
        reported_by=["its own paper" if o else "copied from Happy's Table 1" if c else f"{SHORT[name]}'s paper, a re-run"
                     for o, c in zip(own, copied)])
    return {t.lower().replace(" ", ""): part[CLAIM_COLUMNS] for t, part in table.groupby("table", sort=False)}


def paper_claims() -> dict[str, pd.DataFrame]:
    """The paper's class-iNCD comparison tables (A and F per method, dataset and split) as claimed tables."""
    out = {}
    for file, title in PAPER_TABLES.items():
        t = pd.read_csv(Path(PAPER_DIR) / file, dtype=str)
        rows = []
        for r in t.itertuples():
            label = METHODS.get(r.method, r.method)
            for metric, column in (("A", "accuracy"), ("F", "forgetting")):
                rows.append({
                    "paper": PAPER, "table": title, "row": r.method, "column": f"{r.dataset} {r.split} {column}",
                    "value": getattr(r, column), "label": label, "dataset": DATASETS.get(r.dataset, ""),
                    "split": r.split, "backbone": "dino-vitb16", "k": "known", "evaluation": "inductive",
                    "step": "summary", "group": "summary", "flavour": "", "metric": metric,
                    "metric_definition": f"{metric}: the paper's {column} after the last step",
                    "stages": r.split.split("-")[0], "labelled_fraction": "0 (class-iNCD)",
                    "selection": "not stated", "selection_on_test": "not stated", "seeds": "not stated",
                    "reported_by": "its own paper" if label in PAPER_OWN else "the paper's re-run",
                    "source": "the paper's LaTeX source, ../shared/paper/paper.tex", "note": ""})
        out[title.split(",")[0].lower().replace(" ", "")] = pd.DataFrame(rows, columns=CLAIM_COLUMNS)
    return out


def write_claimed(store: Path) -> list[Path]:
    """Every claimed table under `claimed/`: the paper's and each peer's."""
    written = []
    sources = {"liu-et-al": paper_claims(), **{name: peer_claims(name) for name in PEERS}}
    for source, tables in sources.items():
        for stem, table in tables.items():
            path = store / CLAIMED / source / f"{stem}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(path, index=False)
            written.append(path)
    return written


WORKFLOW_TEXT = """\
# A bench results store's CI: every pull request's entries are verified (docs/results-store.md of bench).
# Set the repository variable BENCH_PACKAGE to what pip installs bench from (a wheel's URL, a git URL).
name: verify
on: pull_request
jobs:
  verify:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install "${{ vars.BENCH_PACKAGE }}"
      - run: git fetch -q origin "${GITHUB_BASE_REF:-main}"
      - run: bench store verify . --since "origin/${GITHUB_BASE_REF:-main}"
"""

README_TEXT = """\
# A bench results store

Each folder under `submissions/` is one `bench publish`: run bundles whose every number `bench store verify`
recomputes from their stored predictions. `claimed/` holds published tables, each cell with its protocol card:
numbers only, never ranked with the measured ones. `bench store site .` builds the leaderboard.
"""


def init_store(store: Path) -> None:
    """Make `store` (a checkout) a ready store: its mark, the claimed tables, the CI workflow, a README."""
    store = Path(store)
    (store / STORE_MARK).write_text(dump({"store": "bench results", "version": STORE_FORMAT, "made_by": VERSION}))
    write_claimed(store)
    (store / WORKFLOW).parent.mkdir(parents=True, exist_ok=True)
    (store / WORKFLOW).write_text(WORKFLOW_TEXT)
    if not (store / "README.md").exists():
        (store / "README.md").write_text(README_TEXT)
