"""GPU-hours of each block of the `paper` grid (one seed), modelled with cost_model.py's counts.

    python benchmarks/cost_per_table.py [--throughput 7600]

Per block of registries/grids/paper.py (Tab. 5, 2, 3, 4 and the appendix's CaSSLe table): the authors'
protocol, bench's default for the paper grid (frozen-backbone methods on the feature bank, the methods
that train the last blocks on fresh views: `features.tokens=live`) and bench with `features.tokens=bank`.
A model: block counts turned into hours at a throughput measured on an H200 (see cost_model.py). Tab. 4 is counted for
ViT-B/16 only (its ResNet-50 and CLIP rows are Baseline on the feature bank as well). A run in several
blocks is counted in each; the banks are built once per dataset (last line).
"""
from __future__ import annotations

import argparse

import cost_model as c

SMALL, EVERY = ["C10", "C100", "T200"], list(c.TASKS)
BLOCKS = {
    "tab5": (["EwC", "LwF", "DER", "ResTune", "FRoST", "CaSSLe", "Baseline", "Baseline++"], EVERY, [2, 5]),
    "tab2": (["K-means", "Joint (frozen)", "Joint (unfrozen)", "Baseline", "Baseline++"], SMALL, [2, 5]),
    "tab3": (["Baseline++", "Baseline", "Baseline++", "Baseline"], SMALL, [2, 5]),
    "tab4": (["Baseline"], SMALL, [5]),
    "cassle": (["CaSSLe", "Baseline", "Baseline++"], EVERY, [2, 5]),
}
LIVE = set(c.TAIL) | {"CaSSLe"}  # what trains blocks on fresh views under the default features.tokens=live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--throughput", type=float, default=c.cost.THROUGHPUT, help="ViT-B/16 full forwards per second")
    hours = 1 / (parser.parse_args().throughput * c.DEPTH) / 3600
    print(f"{'block':<8}{'authors GPU-h':>15}{'bench default':>15}{'tokens=bank':>13}")
    for name, (methods, datasets, splits) in BLOCKS.items():
        cells = [(m, c.TASKS[d][s]) for m in methods for d in datasets for s in splits]
        authors = sum(c.authors(m, sizes) for m, sizes in cells) * hours
        default = sum(c.authors(m, sizes) if m in LIVE else c.bench(m, sizes) for m, sizes in cells) * hours
        banked = sum(c.bench(m, sizes) for m, sizes in cells) * hours
        print(f"{name:<8}{authors:15.1f}{default:15.1f}{banked:13.1f}")
    print(f"{'banks':<8}{'':>15}{sum(c.banks(d)[0] for d in c.TASKS) * hours:15.1f}{'(once, all datasets)':>22}")


if __name__ == "__main__":
    main()
