"""bench is one importable package: methods/ and registries/ of the checkout are `bench.methods` and
`bench.registries`, and moving them there changed no run id."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from bench.config.grids import expand, grid_names, load_grid

# ids computed before methods/ and registries/ became bench.methods and bench.registries: a run id
# names a results directory, so changing one would orphan every finished run
PINNED = [
    ("demo", dict(), 0, "fe8b7ca37b5e3be2"),
    # index 0: a selection narrows the grid, so EwC no longer runs on Tab. 4's other two backbones (the same id)
    ("paper", dict(methods=["EwC"], datasets=["cifar100"], splits=["5-step"], seeds=[0]), 0, "b4fe11e9b589ea5f"),
    ("smoke", dict(methods=["Joint (unfrozen)"]), 0, "9fb1fc91b697caac"),
]


@pytest.mark.parametrize("grid, selection, index, run_id", PINNED)
def test_run_ids_survive_the_move_into_one_package(grid, selection, index, run_id):
    assert expand(load_grid(grid), **selection)[index].run_id == run_id


# every registered grid's runs, as (count, sha256 of the sorted run ids joined by newlines), computed before
# bench/ was laid out by concern (docs/architecture.md): moving the code changed no run id. Changed on purpose
# since: cgcd's CUB-200 runs (the mixed setting trains on the whole official training set, `setting.whole_train`:
# they hold other images now, so they are other runs; its CIFAR-100 ids kept) and its happy-cub-5-stage block;
# then its trained-last-block and PromptCCD-protocol blocks (30 runs added; the other 162 ids are the earlier pin's,
# 9e7ae023…), and VB-CGCD's runs in cgcd and cgcd-demo (every earlier run id kept); the peers' grids
# happy-tables and promptccd-tables added; Happy++ in cgcd (3 runs) and cgcd-smoke (3); MetaGCD in
# cgcd (6), cgcd-smoke (2) and the peers' grids (happy-tables 12, promptccd-tables 36, vb-cgcd-tables 12): every other id kept; vb-cgcd-tables (issue 52)
GRID_RUN_IDS = {
    "backbones": (470, "a919b5286172589498f78254c038d682c3fe48fbef1651ab44e2558ebb5402fd"),
    "cgcd": (228, "00f15152bb1ddfeb61b3d510b1c654526dfa4b31b74a04ebd7d4933b3cd1ee3b"),
    "cgcd-smoke": (20, "c7db7e99f06c227187408bc2d2657922b20e2fc3c0a23c89efe80ab4c94b4536"),
    "cgcd-drift-smoke": (24, "5335542888407311cebeace197d43bc0df059990eac1c080ba9ff7d63e821fd7"),
    "cgcd-demo": (84, "7633a1095320f4435a1e531c38775c9c4db9b7c00be1ae3dc5afe135f2903d4a"),
    "demo": (24, "9b45f7a89738af22d698a6721829a08fdc8233190b3be7bc11138650873f8d78"),
    "happy-tables": (60, "7dc82904ce3fac39e04a0eba70c0c5c7264fa2372e97df0512fdd06c4c4030fc"),  # +12: Table 4, 10 sessions
    "promptccd-tables": (72, "4029c26cfbe27bea59ddaafb773bd0d6336bdf252c6d32af5c1c7f0efdbe44c9"),
    "vb-cgcd-tables": (33, "552d0aa6b3747bb9a4ce15c5366888d30391452299ab532c674b06ae8e1001f0"),
    "full": (348, "dfd2d47e76102972c860c1032d752fdb2c71a7794d86bdfa6e056c8bd852b81e"),
    "paper": (116, "dcd89b6cf20ad155c9ad5b92d019e2e862f6c349b382a748bdb8a2aa14f214d8"),
    "smoke": (12, "f8b69cb683e83d4ae7259e316aeaf6313c275b30150cf898d42a93cc6a7c174a"),
}


def test_every_registered_grid_keeps_its_run_ids_across_the_layout_by_concern():
    assert sorted(grid_names()) == sorted(GRID_RUN_IDS)  # a new grid is pinned here when it lands
    for grid, (count, digest) in GRID_RUN_IDS.items():
        ids = sorted(spec.run_id for spec in expand(load_grid(grid)))
        assert (len(ids), hashlib.sha256("\n".join(ids).encode()).hexdigest()) == (count, digest), grid


def test_only_bench_is_importable_at_the_top_level():
    code = ("import importlib.util, bench.methods, bench.registries; "
            "print([n for n in ('methods', 'registries', 'benchmarks') if importlib.util.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/", env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert out.stdout.strip() == "[]"


def test_a_selection_narrows_a_grid_and_adds_only_what_the_grid_does_not_hold():
    cgcd = load_grid("cgcd")
    # Happy is in one block of cgcd (Happy's CUB, trained last block): --methods happy runs it there alone
    # (was: in every block, 12 runs the grid does not hold beside its own 3)
    happy = expand(cgcd, methods=["happy"])
    assert {(s.method, s.dataset, s.split) for s in happy} == {("Happy", "cub200", "happy-cub-5-stage")}
    assert len(happy) == len(cgcd.seeds)
    assert {s.run_id for s in happy} <= {s.run_id for s in expand(cgcd)}  # the grid's own runs, nothing else
    narrowed = expand(cgcd, methods=["K-means"], datasets=["cifar100"])
    assert {s.run_id for s in narrowed} <= {s.run_id for s in expand(cgcd)}
    assert {s.split for s in narrowed} == {"happy-5-stage", "promptccd-3-stage"}
    # what the grid does not hold is run across it, as before: EwC on the demo grid, the synthetic dataset
    demo = load_grid("demo")
    ewc = expand(demo, methods=["EwC"], seeds=[0])
    assert {(s.dataset, s.split) for s in ewc} == {(d, sp) for d in demo.datasets for sp in demo.splits}
    assert {s.dataset for s in expand(demo, datasets=["synthetic"], seeds=[0])} == {"synthetic"}
