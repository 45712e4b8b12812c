"""Each peer's published table has a grid that runs exactly its cells (`<peer>-tables`): every published cell that
bench can measure (a method bench registers for the mixed setting, on a dataset, split, backbone, K and evaluation
bench has) is a run of the grid, and the grid holds nothing the table does not list. A method added to bench that a
peer's table lists makes the test fail until the grid runs it too."""
from __future__ import annotations

import pytest

from bench.config.grids import expand, load_grid
from bench.reporting.peers import departures, mapped, peer_reference, split_parts
from bench.splits.settings import describe
from registries.catalogue import method_info, method_names

PEER_GRIDS = {"happy": "happy-tables", "promptccd": "promptccd-tables", "vb-cgcd": "vb-cgcd-tables"}


def _mixed_methods() -> set[str]:
    return {name for name in method_names() if "mixed" in method_info(name).runs_on.settings}


def _published_cells(peer: str) -> set[tuple[str, ...]]:
    table = peer_reference(peer)
    table = table[mapped(table) & table["label"].isin(_mixed_methods())]
    return set(table[["label", "dataset", "split", "backbone", "k", "evaluation"]].itertuples(index=False, name=None))


def _grid_cells(grid_name: str, **selection) -> set[tuple[str, ...]]:
    cells = set()
    for spec in expand(load_grid(grid_name), seeds=[0], **selection):
        protocol, k, evaluation = split_parts(describe(spec.split, spec.config))
        cells.add((spec.label, spec.dataset, protocol, spec.backbone, k, evaluation))
    return cells


@pytest.mark.parametrize("peer", sorted(PEER_GRIDS))
def test_a_peers_grid_runs_exactly_its_published_cells(peer):
    published = _published_cells(peer)
    assert published, f"no cell of {peer}'s tables names a method bench runs"
    assert _grid_cells(PEER_GRIDS[peer]) == published


def test_the_happy_grid_replays_happys_images_and_arrival_and_marks_its_selection():
    for spec in expand(load_grid("happy-tables"), seeds=[0]):
        setting = spec.config["setting"]
        # MetaGCD refuses a test-set rule: its last epoch; every other method Happy's selection
        assert setting["draw"] == "happy" and setting["selection"] == ("last" if spec.method == "MetaGCD" else "happy")
        assert setting["arrival"] == {"happy-5-stage": "happy", "happy-in100-5-stage": "happy",
                                      "happy-cub-5-stage": "happy-ssb", "happy-10-stage": "happy"}[spec.split]
        assert ("ORACLE ON TEST" in describe(spec.split, spec.config)) is (spec.method != "MetaGCD")
        assert departures("happy", describe(spec.split, spec.config)) == []  # Happy's run, not only its protocol


def test_methods_narrow_a_peer_grid_to_its_own_cells():
    """`--methods happy` on the Happy grid runs Happy on the four datasets of its Table 1 and the two of its Table 4
    (10 sessions), nothing else."""
    narrowed = _grid_cells("happy-tables", methods=["Happy"])
    assert narrowed == {cell for cell in _published_cells("happy") if cell[0] == "Happy"}
    assert len(narrowed) == 6


def test_the_vb_cgcd_grid_runs_its_class_order_and_happys_copied_row_as_happy_ran_it():
    """VB-CGCD's own cells in the class order (no departure to mark), with bench's default selection (the paper does
    not say how it ran Happy and PromptCCD); Happy's ImageNet-100 row, copied from Happy's Table 1, as Happy ran it."""
    for spec in expand(load_grid("vb-cgcd-tables"), seeds=[0]):
        split = describe(spec.split, spec.config)
        assert departures("vb-cgcd", split, spec.label) == []
        if spec.method == "MetaGCD":  # its rows are Happy's Table 1's, copied: as happy-tables runs it, the same runs
            assert spec.run_id in {s.run_id for s in expand(load_grid("happy-tables"), seeds=[0])}
        elif spec.split == "happy-5-stage":
            assert spec.config["setting"]["arrival"] == "canonical" and spec.config["setting"]["selection"] == "last"
        else:
            assert (spec.label, spec.dataset, spec.split) == ("Happy", "imagenet100", "happy-in100-5-stage")
            assert "ORACLE ON TEST" in split
