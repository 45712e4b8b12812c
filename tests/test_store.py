"""The shared results store (bench/store/, docs/results-store.md): `bench publish` into real git repositories made on
the spot (a bare remote, clones, branches, pushes), `bench store verify` entry by entry, hostile submissions refused
one by one with the rest of the store untouched, reproductions, the claimed tables and the store's site."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.cli import main
from bench.store import checks
from bench.store.claimed import WORKFLOW_TEXT
from bench.store.layout import ENTRY, SUBMISSION, SUBMISSIONS, WORKFLOW, dump, entry_id, file_sha256, read_json
from bench.store.verify import verify_store

INCD = ["--grid", "smoke", "--methods", "K-means", "Baseline", "--backbone", "pixels", "--splits", "2-step",
        "--cfg-options", "dataset.num_classes=6"]
MIXED = ["--grid", "cgcd-smoke", "--methods", "k-means", "--splits", "happy-5-stage", "--seeds", "0"]


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Three finished runs: two of class-iNCD and one of the mixed setting."""
    out = tmp_path_factory.mktemp("store_results") / "results"
    assert main(["run", *INCD, "--cluster", "debug", "--results", str(out)]) == 0
    assert main(["run", *MIXED, "--cluster", "debug", "--results", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def published(results, tmp_path_factory) -> tuple[Path, Path]:
    """A bare remote made with `git init --bare`, both grids published into it and pushed: (remote, a clone of the
    first submission's branch)."""
    base = tmp_path_factory.mktemp("store")
    remote = base / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    assert main(["publish", *INCD, "--results", str(results), "--store", str(remote), "--push",
                 "--branch", "publish/incd", "--checkout", str(base / "work")]) == 0
    assert main(["publish", *MIXED, "--results", str(results), "--store", str(base / "work"),
                 "--branch", "publish/mixed"]) == 0
    work = base / "work"
    git(work, "checkout", "-q", "main")
    git(work, "merge", "-q", "--no-edit", "publish/incd", "publish/mixed")  # the maintainers merge both
    return remote, work


def tree(store: Path) -> dict[str, str]:
    return {p.relative_to(store).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(store.rglob("*")) if p.is_file() and ".git" not in p.relative_to(store).parts}


def test_publish_into_a_bare_store_then_verify_recomputes_every_run(published, results, capsys):
    remote, work = published
    assert "main" in git(remote, "branch") and "publish/incd" in git(remote, "branch")
    clone = work.parent / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "publish/incd", str(remote), str(clone)], check=True)
    # one commit over the store's main, and only the submission's folder in it
    assert git(clone, "rev-list", "--count", "origin/main..HEAD").strip() == "1"
    changed = git(clone, "diff", "--name-only", "origin/main", "HEAD").split()
    assert changed and all(p.startswith(f"{SUBMISSIONS}/incd-") or p.startswith(f"{SUBMISSIONS}/smoke-") for p in changed)
    entries = sorted(p for p in (clone / SUBMISSIONS).glob("*/*") if p.is_dir())
    assert len(entries) == 2
    for entry in entries:  # byte for byte the run folder's files
        run = results / "runs" / read_json(entry / ENTRY, ENTRY)["run_id"]
        for name in ("spec.json", "provenance.json", "predictions.npz"):
            assert (entry / name).read_bytes() == (run / name).read_bytes()
        assert not (entry / "config.py").exists()  # a run's config as Python is never carried
    capsys.readouterr()
    assert main(["store", "verify", str(clone), "--since", "origin/main"]) == 0
    said = capsys.readouterr().out
    assert said.count(": recomputed") == 2 and "2 new since origin/main" in said and "0 refused" in said


def test_the_mixed_run_carries_its_split_and_verifies_with_the_rest(published, capsys):
    _, work = published
    # each submission's branch starts from the store's main, not from the other's
    assert git(work, "merge-base", "publish/incd", "publish/mixed") == git(work, "rev-parse", "publish/incd~1")
    mixed = [p for p in (work / SUBMISSIONS).glob("*/*") if (p / "split.json").exists()]
    assert len(mixed) == 2  # the grid's two K-means runs: its last epoch, and Happy's selection
    for entry in mixed:
        assert read_json(entry / ENTRY, ENTRY)["card"]["manifest_sha256"] == file_sha256(entry / "split.json")
    verdicts = verify_store(work, say=None)
    assert [v.level for v in verdicts if v.path.startswith(SUBMISSIONS)] == ["recomputed"] * 4
    assert {v.level for v in verdicts if v.path.startswith("claimed/")} == {"claimed"}


def test_nothing_is_published_twice_nor_unfinished(published, results, tmp_path, capsys):
    _, work = published
    store = tmp_path / "merged"
    shutil.copytree(work, store, symlinks=True)
    git(store, "checkout", "-q", "main")
    git(store, "merge", "-q", "--no-edit", "publish/incd")  # the maintainers merged the first pull request
    capsys.readouterr()
    assert main(["publish", *INCD, "--results", str(results), "--store", str(store)]) == 2
    err = capsys.readouterr()
    assert "already in the store from this results folder" in err.out and "nothing new to publish" in err.err
    assert git(store, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"  # and no branch left behind
    assert "publish/smoke" not in git(store, "branch")
    # an unfinished run, and one whose metrics no longer recompute, are left out with why
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    runs = sorted(p for p in (copy / "runs").glob("*") if json.loads((p / "spec.json").read_text())["split"] == "2-step")
    (runs[0] / "DONE").unlink()
    import pandas as pd

    frame = pd.read_parquet(runs[1] / "metrics.parquet")
    frame.loc[frame.index[-1], "value"] += 1.0
    frame.to_parquet(runs[1] / "metrics.parquet", index=False)
    fresh = tmp_path / "fresh"
    assert main(["store", "init", str(fresh)]) == 0
    capsys.readouterr()
    assert main(["publish", *INCD, "--results", str(copy), "--store", str(fresh)]) == 2
    said = capsys.readouterr().out
    assert "not finished" in said and "do not recompute" in said
    (runs[0] / "DONE").write_text("finished\n")
    assert main(["publish", *INCD, "--results", str(copy), "--store", str(fresh)]) == 0
    said = capsys.readouterr().out
    assert "do not recompute" in said and "published 1 run(s)" in said


def hostile_copy(store: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the store with a second submission holding a copy of its first class-iNCD entry: (store, entry)."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy, symlinks=True)
    good = sorted(p for p in (copy / SUBMISSIONS).glob("*/*") if p.is_dir() and not (p / "split.json").exists())[0]
    hostile = copy / SUBMISSIONS / "hostile"
    hostile.mkdir()
    (hostile / SUBMISSION).write_text(dump({"submitted": "9999-01-01T00:00:00+00:00", "submission": "hostile"}))
    shutil.copytree(good, hostile / good.name)
    return copy, hostile / good.name


def reseal(entry_dir: Path, **changes) -> Path:
    """Make the entry's own digests, id and folder name agree with its (changed) files, as a careful forger would."""
    entry = read_json(entry_dir / ENTRY, ENTRY)
    entry.update(changes)
    for name in list(entry["files"]):
        if (entry_dir / name).exists():
            entry["files"][name] = {"sha256": file_sha256(entry_dir / name), "bytes": (entry_dir / name).stat().st_size}
    entry["id"] = entry_id(entry["run_id"], entry["files"]["predictions.npz"]["sha256"], entry["origin"])
    (entry_dir / ENTRY).write_text(json.dumps(entry))
    return entry_dir.rename(entry_dir.parent / entry["id"])


def rewrite_predictions(entry_dir: Path, change) -> None:
    with np.load(entry_dir / "predictions.npz") as stored:
        arrays = {k: stored[k] for k in stored.files}
    change(arrays)
    with (entry_dir / "predictions.npz").open("wb") as fh:
        np.savez_compressed(fh, **arrays)


def symlink(entry: Path) -> str:
    (entry / "provenance.json").unlink()
    (entry / "provenance.json").symlink_to("/etc/hostname")
    return "is a symlink"


def path_out(entry: Path) -> str:
    data = read_json(entry / ENTRY, ENTRY)
    data["files"]["../../../STORE.json"] = data["files"].pop("provenance.json")
    (entry / "provenance.json").unlink()
    (entry / ENTRY).write_text(json.dumps(data))
    return "not a file an entry holds"


def pickled(entry: Path) -> str:
    rewrite_predictions(entry, lambda a: a.update(unified_0=np.array([{"x": 1}] * 3, dtype=object)))
    reseal(entry)
    return "holds Python objects (a pickle)"


def wrong_length(entry: Path) -> str:
    rewrite_predictions(entry, lambda a: a.update(unified_1=a["unified_1"][:-1]))
    reseal(entry)
    return "not integer arrays of one length"


def wrong_dtype(entry: Path) -> str:
    rewrite_predictions(entry, lambda a: a.update(test_labels_0=a["test_labels_0"].astype(np.float32)))
    reseal(entry)
    return "not integer arrays"


def not_recomputed(entry: Path) -> str:
    data = read_json(entry / ENTRY, ENTRY)
    data["claims"][-1][4] = (data["claims"][-1][4] or 0.0) + 3.0
    (entry / ENTRY).write_text(json.dumps(data))
    return "its predictions give"


def unregistered_protocol(entry: Path) -> str:
    from bench.config.spec import RunSpec

    spec = json.loads((entry / "spec.json").read_text())
    spec["split"] = "7-step"
    (entry / "spec.json").write_text(json.dumps(spec))
    data = spec.copy()
    data.pop("run_id"), data.pop("label")
    reseal(entry, run_id=RunSpec(**data).run_id)
    return "not a protocol bench registers"


def oversized(entry: Path) -> str:
    (entry / "source").mkdir()
    (entry / "source" / "pad.py").write_text("#" * (checks.MAX_ENTRY_BYTES + 1))
    return "over the limit"


def nan_claim(entry: Path) -> str:
    data = read_json(entry / ENTRY, ENTRY)
    data["claims"][0][4] = float("nan")
    (entry / ENTRY).write_text(json.dumps(data))  # Python writes NaN, which JSON does not have
    return "holds NaN"


def duplicate(entry: Path) -> str:
    return "a duplicate of"


def other_numbers(entry: Path) -> str:
    from bench.protocol.steps import replay

    def flip(arrays):
        arrays["unified_1"] = (arrays["unified_1"] + 1) % (arrays["unified_1"].max() + 1)

    rewrite_predictions(entry, flip)
    with np.load(entry / "predictions.npz") as stored:
        rows = replay({k: stored[k] for k in stored.files})
    data = read_json(entry / ENTRY, ENTRY)
    data["claims"] = [[r.step, r.group, r.flavour, r.metric, None if np.isnan(r.value) else r.value] for r in rows]
    (entry / ENTRY).write_text(json.dumps(data))
    reseal(entry)
    return "with other numbers than"


def stray_file(entry: Path) -> str:
    shutil.rmtree(entry)  # the submission holds nothing but the stray file
    (entry.parent / "run.py").write_text("import os\n")
    return "a file beside the entries"


@pytest.mark.parametrize("attack", [symlink, path_out, pickled, wrong_length, wrong_dtype, not_recomputed,
                                    unregistered_protocol, oversized, nan_claim, duplicate, other_numbers, stray_file])
def test_a_hostile_submission_is_refused_entry_by_entry(published, tmp_path, attack):
    _, work = published
    store, entry = hostile_copy(work, tmp_path)
    expected = attack(entry)
    before = tree(store)
    verdicts = verify_store(store, say=None)
    refused = [v for v in verdicts if v.level is None]
    assert len(refused) == 1 and refused[0].path.startswith(f"{SUBMISSIONS}/hostile/"), [v.line for v in refused]
    assert expected in refused[0].why, refused[0].why
    # every entry of the store it came into is still what it was
    assert [v.level for v in verdicts if v.path.startswith(SUBMISSIONS) and "/hostile/" not in v.path] == ["recomputed"] * 4
    assert tree(store) == before


def test_a_run_reproduced_from_another_results_folder_is_reproduced(published, tmp_path, capsys):
    _, work = published
    store = tmp_path / "store"
    shutil.copytree(work, store, symlinks=True)
    elsewhere = tmp_path / "elsewhere"
    argv = ["--grid", "smoke", "--methods", "K-means", "--backbone", "pixels", "--splits", "2-step",
            "--cfg-options", "dataset.num_classes=6"]
    assert main(["run", *argv, "--cluster", "debug", "--results", str(elsewhere)]) == 0
    assert main(["publish", *argv, "--results", str(elsewhere), "--store", str(store), "--branch", "again"]) == 0
    capsys.readouterr()
    assert main(["store", "verify", str(store)]) == 0
    said = capsys.readouterr().out
    assert said.count(": reproduced (by ") == 2, said  # each of the two K-means entries by the other


def test_the_store_ci_workflow_runs_verify_on_a_pull_request_branch(published, tmp_path):
    remote, _ = published
    steps = yaml.safe_load(WORKFLOW_TEXT)["jobs"]["verify"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    clone = tmp_path / "pr"
    subprocess.run(["git", "clone", "-q", "-b", "publish/incd", str(remote), str(clone)], check=True)
    assert (clone / WORKFLOW).read_text() == WORKFLOW_TEXT
    env = {**os.environ, "GITHUB_BASE_REF": "main", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in runs[1:]:  # the first installs bench, which this suite runs from
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert "2 recomputed" in done.stdout and "2 new since origin/main" in done.stdout
    # and fails a pull request that carries a refused entry
    entry = next(p for p in (clone / SUBMISSIONS).glob("*/*") if p.is_dir())
    not_recomputed(entry)
    done = subprocess.run(["bash", "-c", runs[-1]], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "refused: claims" in done.stdout


def test_every_claimed_table_has_its_cards_and_a_bad_one_is_refused(published, tmp_path):
    from bench.reporting.peers import peer_reference

    _, work = published
    verdicts = {v.path: v for v in verify_store(work, say=None) if v.path.startswith("claimed/")}
    happy = sum(len(v.claims) for p, v in verdicts.items() if p.startswith("claimed/happy/"))
    assert happy == len(peer_reference("happy"))
    table1 = verdicts["claimed/happy/table1.csv"].claims
    own = table1[table1["label"] == "Happy"]
    assert set(own["reported_by"]) == {"its own paper"} and set(own["selection_on_test"]) == {"yes"}
    store = tmp_path / "store"
    shutil.copytree(work, store, symlinks=True)
    path = store / "claimed" / "happy" / "table1.csv"
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0], text[1].replace(",66.16,", ",NaN,"), *text[2:]]) + "\n")
    refused = [v for v in verify_store(store, say=None) if v.level is None]
    assert [v.path for v in refused] == ["claimed/happy/table1.csv"] and "not a finite number" in refused[0].why


def test_the_store_site_ranks_measured_entries_and_sets_claimed_numbers_beside(published, tmp_path, capsys):
    _, work = published
    assert main(["store", "site", str(work), "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "synthetic · 2-step · pixels" in index and "claimed (published numbers, not ranked)" in index
    assert index.count('<span class="st st-done">recomputed</span>') == 4
    happy = (tmp_path / "site" / "methods" / "happy.html").read_text()
    # Happy's CIFAR-100 numbers, its own and VB-CGCD's re-run, with what differs between them
    assert "59.99" in happy and "60.77" in happy and "what differs between them" in happy
    assert "its own paper" in happy and "VB-CGCD&#x27;s paper, a re-run" in happy


def test_a_folder_that_is_not_a_store_is_one_line(tmp_path, capsys):
    assert main(["store", "verify", str(tmp_path)]) == 2
    assert "is not a bench results store" in capsys.readouterr().err


def test_report_sets_the_local_runs_beside_the_stores_entries_with_paired_statistics(published, results, tmp_path,
                                                                                      capsys):
    _, work = published
    out = tmp_path / "report"
    assert main(["report", *INCD, "--results", str(results), "--out", str(out), "--format", "csv", "--store", str(work),
                 "--bootstrap", "200"]) == 0
    text = (out / "store_comparison.md").read_text()
    assert "## synthetic · 2-step · pixels" in text
    rows = [line for line in text.splitlines() if line.startswith("| K-means ") and "| K-means " in line[2:]]
    # the local K-means run is the stored one: the same predictions, a difference of exactly 0 on the same images
    assert len(rows) == 1 and "+0.00" in rows[0] and "[+0.00, +0.00]" in rows[0] and "recomputed" in rows[0]
    baseline = [line for line in text.splitlines() if line.startswith("| Baseline ") and "| K-means " in line]
    assert len(baseline) == 1 and "| 1 " in baseline[0]  # one seed paired, on the same test images
    assert main(["report", *INCD, "--results", str(results), "--out", str(tmp_path / "r2"), "--store", str(tmp_path)]) == 2
    assert "is not a bench results store" in capsys.readouterr().err and not (tmp_path / "r2").exists()


def test_a_domain_shifted_streams_run_verifies_and_its_domains_are_checked(tmp_path, capsys):
    """A stream's predictions (schema version 2: its domains) publish, recompute, and a forged domain is refused."""
    stream = ["--grid", "cgcd-drift-smoke", "--methods", "k-means", "--cfg-options", "setting.domains=imagenet-c-6"]
    results, store = tmp_path / "results", tmp_path / "store.git"
    assert main(["run", *stream, "--cluster", "debug", "--results", str(results)]) == 0
    subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
    assert main(["publish", *stream, "--results", str(results), "--store", str(store), "--branch", "stream",
                 "--checkout", str(tmp_path / "work")]) == 0
    work = tmp_path / "work"
    assert [v.level for v in verify_store(work, say=None) if v.path.startswith(SUBMISSIONS)] == ["recomputed"]
    (entry,) = [p for p in (work / SUBMISSIONS).glob("*/*") if p.is_dir()]
    rewrite_predictions(entry, lambda a: a.update(test_domain_2=a["test_domain_2"] + 6))
    reseal(entry)
    (refused,) = [v for v in verify_store(work, say=None) if v.path.startswith(SUBMISSIONS)]
    assert refused.level is None and "step 2's domains are not 0..5" in refused.why, refused.why
