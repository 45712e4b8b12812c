"""Bad input, tried as a new user would: each gets a non-zero exit and one line on stderr that names
what is wrong and what is valid, never a traceback, and nothing already finished is lost. Damaged
results are re-run and kept aside, never reported with a traceback."""
from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pandas as pd
import re

import pytest

from bench.cli import main
from bench.protocol.runner import execute
from bench.runs.rundir import CHECKPOINT, DONE, METRICS, run_dir
from tests.helpers import tiny_specs

SMOKE = ["--grid", "smoke", "--methods", "Baseline", "Baseline++", "K-means", "--backbone", "pixels", "--results", "{results}"]
SYNTH = ["--datasets", "synthetic"]
REFUSING_SBATCH = "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Requested node configuration is not available' >&2\nexit 1\n"

# (id, argv with {results}/{empty}/{file} placeholders, what the one line must say, PATH override)
CASES = [
    ("unknown method", ["run", *SMOKE, "--methods", "Basline"], "unknown method 'Basline'; known: Baseline, ", None),
    ("unknown preset", ["run", *SMOKE, "--methods", "Baseline:papr"], "unknown preset of Baseline 'papr'; known: code, equations, no_cosnorm", None),
    ("unknown dataset", ["run", *SMOKE, "--datasets", "cifar1O"], "unknown dataset 'cifar1O'; known: ", None),
    ("unknown split", ["run", *SMOKE, "--splits", "3-step"], "unknown split '3-step'; known: 10-step, 2-step, 5-step", None),
    ("unknown backbone", ["run", "--backbone", "resnet", "--results", "{results}"], "unknown backbone 'resnet'; known: ", None),
    ("unknown grid", ["run", "--grid", "nope", "--results", "{results}"], "unknown grid 'nope'; known: backbones, cgcd, cgcd-demo, cgcd-drift-smoke, cgcd-smoke, demo, full, happy-tables, paper, promptccd-tables, smoke, vb-cgcd-tables", None),
    ("unknown cluster", ["run", *SMOKE, "--cluster", "nope"], "unknown cluster 'nope'; choose from local, debug, slurm", None),
    ("tune a batch of no trials", ["tune", *SMOKE[:4], *SMOKE[6:], "--trials", "2", "--batch", "0"], "--batch 0: give --batch N with N >= 1 (1: one trial at a time", None),
    ("tune a batch on slurm", ["tune", *SMOKE[:4], *SMOKE[6:], "--trials", "2", "--batch", "4", "--cluster", "slurm"], "--batch 4 runs a batch's trials together in the tuner's own process: use --cluster local or debug", None),
    ("zero threads", ["run", *SMOKE, "--threads", "0"], "--threads 0: must be an integer >= 1 (CPU compute threads of each run, default 1)", None),
    ("unknown method key", ["run", *SMOKE, "--cfg-options", "method.epochz=3"], "'method.epochz': no selected method has it; valid keys: ", None),
    ("unknown section", ["run", *SMOKE, "--cfg-options", "featurez.views=3"], "unknown section 'featurez'; valid sections: ", None),
    ("unknown features key", ["run", *SMOKE, "--cfg-options", "features.viewz=3"], "'viewz' is not a known key; valid keys: features.bank_seed", None),
    ("option without value", ["run", *SMOKE, "--cfg-options", "novalue"], "bad --cfg-options item 'novalue': use section.key=value", None),
    ("epochs not a number", ["run", *SMOKE, "--cfg-options", "method.epochs=abc"], "method.epochs='abc': must be an integer", None),
    ("negative epochs", ["run", *SMOKE, "--cfg-options", "method.epochs=-3"], "method.epochs=-3: must be an integer >= 1", None),
    ("fractional epochs", ["run", *SMOKE, "--cfg-options", "method.epochs=2.5"], "method.epochs=2.5: must be an integer", None),
    ("zero ktrfr epochs", ["run", *SMOKE, "--cfg-options", "method.ktrfr_epochs=0"], "method.ktrfr_epochs=0: must be an integer >= 1", None),
    ("zero batch", ["run", *SMOKE, "--cfg-options", "method.batch_size=0"], "method.batch_size=0: must be an integer >= 1", None),
    ("zero learning rate", ["run", *SMOKE, "--cfg-options", "method.lr=0"], "method.lr=0: must be a number > 0", None),
    ("momentum above 1", ["run", *SMOKE, "--cfg-options", "method.momentum=1.5"], "method.momentum=1.5: must be a number in [0, 1)", None),
    ("negative weight decay", ["run", *SMOKE, "--cfg-options", "method.weight_decay=-1e-4"], "method.weight_decay=-0.0001: must be a number >= 0", None),
    ("zero temperature", ["run", *SMOKE, "--cfg-options", "method.temperature=0"], "method.temperature=0: must be a number > 0", None),
    ("zero sinkhorn iterations", ["run", *SMOKE, "--cfg-options", "method.sk_iters=0"], "method.sk_iters=0: must be an integer >= 1", None),
    ("flag not a boolean", ["run", *SMOKE, "--cfg-options", "method.normalize_weights=yes"], "method.normalize_weights='yes': must be True or False", None),
    ("unknown loss reduction", ["run", *SMOKE, "--cfg-options", "method.swap_reduction=avg"], "method.swap_reduction='avg': must be one of sum, mean", None),
    ("unknown student init", ["run", *SMOKE, "--methods", "Baseline++", "--cfg-options", "method.init_from=zeros"], "method.init_from='zeros': must be one of previous_student, baseline_heads", None),
    ("unknown k-means init", ["run", *SMOKE, "--methods", "K-means", "--cfg-options", "method.init=kmeans"], "method.init='kmeans': must be one of k-means++, random", None),
    ("too few per-step epochs", ["run", *SMOKE, "--cfg-options", "method.epochs_per_step=[10]"], "method.epochs_per_step=[10]: must be None or a list of at least 2 integers >= 1", None),
    ("more blocks to unfreeze than the ViT has", ["run", "--grid", "smoke", "--methods", "ResTune", "--results", "{results}", "--cfg-options", "backbone.kwargs.depth=1"], "ResTune · synthetic · 2-step · timm:vit_tiny_patch16_224 · seed 0: method.unfreeze: cannot unfreeze the last 2 blocks of a 1-block backbone; choose 1..1", None),
    ("unknown block to unfreeze from", ["run", "--grid", "smoke", "--methods", "FRoST", "--results", "{results}", "--cfg-options", "method.unfreeze=blocks.7"], "method.unfreeze: unknown block 'blocks.7' to unfreeze from; this backbone has blocks.0 .. blocks.1", None),
    ("unknown frost labelling", ["run", "--grid", "smoke", "--methods", "FRoST", "--results", "{results}", "--cfg-options", "method.labelling=kmeans"], "method.labelling='kmeans': must be one of rankstats, sinkhorn", None),
    ("a per-view probability for one view only", ["run", "--grid", "smoke", "--methods", "CaSSLe", "--results", "{results}", "--cfg-options", "method.view_solarize_p=[0.2]"], "method.view_solarize_p=[0.2]: must be a list of two probabilities in [0, 1], one per view", None),
    ("a crop scale of nothing", ["run", "--grid", "smoke", "--methods", "CaSSLe", "--results", "{results}", "--cfg-options", "method.view_crop_min_scale=0"], "method.view_crop_min_scale=0: must be a number in (0, 1]", None),
    ("negative saturation jitter", ["run", "--grid", "smoke", "--methods", "CaSSLe", "--results", "{results}", "--cfg-options", "method.view_saturation=-0.2"], "method.view_saturation=-0.2: must be a number >= 0", None),
    ("negative class order seed", ["run", *SMOKE, "--cfg-options", "split.class_order_seed=-1"], "split.class_order_seed=-1: must be None (the canonical class order) or an integer >= 0", None),
    ("one view in bank mode", ["run", *SMOKE, "--cfg-options", "features.views=1"], "features.views=1: must be an integer >= 2 in bank mode", None),
    ("negative views", ["run", *SMOKE, "--cfg-options", "features.mode=exact", "features.views=-1"], "features.views=-1: must be an integer >= 0", None),
    ("unknown tail precision", ["run", *SMOKE, "--cfg-options", "precision.tails=fp16"], "precision.tails='fp16': must be one of fp32, bf16", None),
    ("unknown feature mode", ["run", *SMOKE, "--cfg-options", "features.mode=banc"], "features.mode='banc': must be one of bank, exact", None),
    ("unknown view policy", ["run", *SMOKE, "--cfg-options", "features.policy=simclr"], "features.policy='simclr': must be one of paper, code", None),
    ("pretrained not a path", ["run", *SMOKE, "--cfg-options", "backbone.pretrained=3"], "backbone.pretrained=3: must be true, false or the path of a weights file", None),
    ("zero extraction batch", ["run", *SMOKE, "--cfg-options", "backbone.batch_size=0"], "backbone.batch_size=0: must be an integer >= 1", None),
    ("class count not a number", ["run", *SMOKE, *SYNTH, "--cfg-options", "dataset.num_classes=abc"], "dataset.num_classes='abc': must be an integer", None),
    ("negative noise", ["run", *SMOKE, *SYNTH, "--cfg-options", "dataset.noise=-1"], "dataset.noise=-1: must be a number >= 0", None),
    ("unknown dataset option", ["run", *SMOKE, *SYNTH, "--cfg-options", "dataset.colour=1"], "dataset 'synthetic' has no option 'colour'; valid options: ", None),
    ("split larger than the classes", ["run", *SMOKE, *SYNTH, "--splits", "10-step", "--cfg-options", "dataset.num_classes=5"], "split '10-step' does not fit dataset 'synthetic' (5 classes)", None),
    ("unknown timm model", ["run", *SMOKE, "--backbone", "timm:nosuch_model"], "unknown timm model 'nosuch_model' in backbone 'timm:nosuch_model'; valid names are timm.list_models()", None),
    ("misspelt timm model", ["run", *SMOKE, "--backbone", "timm:vit_tiny_patch16_22.augreg"], "did you mean vit_tiny_patch16_224", None),
    ("negative seed", ["run", *SMOKE, "--seeds", "0", "-1"], "--seeds -1: a seed must be an integer from 0 to 4294967295", None),
    ("unknown device", ["run", *SMOKE, "--device", "gpu"], "unknown --device 'gpu'; use cpu, cuda or cuda:N", None),
    ("data root with nothing", ["run", *SMOKE, "--datasets", "cifar10", "--data-root", "{empty}"], "dataset 'cifar10' not found or incomplete at ", None),
    ("missing weights file", ["run", *SMOKE, "--backbone", "timm:vit_tiny_patch16_224", "--cfg-options", "backbone.pretrained=/nonexistent/w.pth"], "backbone weights file not found: /nonexistent/w.pth", None),
    ("weights dir without the file", ["run", *SMOKE, "--backbone", "dino-vitb16", "--weights-dir", "{empty}", "--cfg-options", "backbone.pretrained=True"], "backbone 'dino-vitb16': no dino_vitbase16_pretrain.pth in the weights directory", None),
    ("unwritable results", ["run", *SMOKE[:-2], "--results", "{file}/results"], "is not writable", None),
    ("unknown profile", ["run", *SMOKE, "--cluster", "slurm", "--profile", "nope"], "unknown SLURM profile 'nope'", None),
    ("unknown slurm option", ["run", *SMOKE, "--cluster", "slurm", "--slurm-options", "gpu=1"], "valid options: ", None),
    ("no slurm client", ["run", *SMOKE, "--cluster", "slurm"], "cannot submit to SLURM: sbatch and srun not on PATH", "{empty}"),
    ("sbatch refuses", ["run", *SMOKE, "--cluster", "slurm"], "sbatch refused the job array: Batch job submission failed: Requested node configuration is not available; profile 'default' asked for", "{fakebin}"),
    ("report of an unknown grid", ["report", "--grid", "nope", "--results", "{results}"], "unknown grid 'nope'", None),
    ("report with nothing finished", ["report", "--grid", "smoke", "--results", "{empty}"], "no finished runs of grid 'smoke'", None),
    ("report options without a grid", ["report", "--results", "{results}", "--cfg-options", "method.epochs=3"], "--cfg-options selects runs of a grid: name it with --grid", None),
    ("data summary of missing data", ["data", "summary", "cifar10", "--data-root", "{empty}"], "dataset 'cifar10' not found or incomplete", None),
    ("cache remove without keys", ["cache", "remove", "--results", "{results}"], "bench cache remove needs bank keys", None),
    ("a superscript digit as --pack", ["run", *SMOKE, "--cluster", "slurm", "--pack", "²"], "--pack ²: give the runs per array task (an integer >= 1) or auto", None),
    ("worker polling every nan seconds", ["worker", *SMOKE, "--poll", "nan"], "--poll nan: must be a number of seconds > 0 and at most 3600", None),
    ("worker polling every inf seconds", ["worker", *SMOKE, "--poll", "inf"], "--poll inf: must be a number of seconds > 0 and at most 3600", None),
    ("worker polling past time.sleep", ["worker", *SMOKE, "--poll", "1e12"], "--poll 1e+12: must be a number of seconds > 0 and at most 3600", None),
]


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A results root holding one finished run, and the places the cases point at."""
    base = tmp_path_factory.mktemp("bad-input")
    (spec,) = tiny_specs(methods=["K-means"])
    execute(spec, base / "results")
    (base / "empty").mkdir()
    (base / "file").write_text("")
    fakebin = base / "fakebin"
    fakebin.mkdir()
    for tool, text in (("sbatch", REFUSING_SBATCH), ("srun", "#!/bin/sh\nexit 0\n")):
        (fakebin / tool).write_text(text)
        (fakebin / tool).chmod((fakebin / tool).stat().st_mode | stat.S_IEXEC)
    return base, spec


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 30 and len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("argv, message, path", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_is_one_clear_line_and_loses_nothing(capsys, monkeypatch, finished, argv, message, path):
    base, spec = finished
    places = {"results": base / "results", "empty": base / "empty", "file": base / "file", "fakebin": base / "fakebin"}
    before = _digest(base / "results" / "runs")
    if path:
        monkeypatch.setenv("PATH", path.format(**places))
    code = main([arg.format(**places) for arg in argv])
    _, err = capsys.readouterr()
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), err
    assert message in lines[0], lines[0]
    assert "Traceback" not in err
    assert _digest(base / "results" / "runs") == before  # nothing finished is touched, let alone lost
    assert (run_dir(base / "results", spec) / DONE).exists()


def test_cuda_without_a_gpu_is_refused_here_but_not_for_slurm(capsys, monkeypatch, finished):
    """`--device` names a device of the machine that runs the jobs: this one for local and debug
    (refused before anything runs), a cluster node for SLURM (a GPU-less submit host may ask for cuda)."""
    import torch

    base, _ = finished
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    before = _digest(base / "results" / "runs")
    for cluster in ("local", "debug"):
        assert main(["run", *[a.format(results=base / "results") for a in SMOKE], "--cluster", cluster,
                     "--device", "cuda"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines == ["bench: error: --device cuda: no CUDA device is available on this machine; available here: cpu"]
    assert _digest(base / "results" / "runs") == before
    assert main(["run", *[a.format(results=base / "results") for a in SMOKE], "--cluster", "slurm", "--device", "cuda",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would be submitted" in out and "with profile default (" in out and "default.py)" in out  # the file named


def test_a_slurm_profile_in_the_working_directory_is_loaded_first_and_named(tmp_path, capsys, monkeypatch):
    (tmp_path / "slurm" / "profiles").mkdir(parents=True)
    mine = tmp_path / "slurm" / "profiles" / "default.py"
    mine.write_text("default = dict(slurm_partition='mine', timeout_min=5)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", *[a.format(results=tmp_path / "results") for a in SMOKE], "--cluster", "slurm",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    # the file loaded is named (the output shortens long paths in the middle) and its partition is the one used
    assert "with profile default (" in out and "slurm/profiles/default.py)" in out and "partition=mine" in out


# --- damaged results: named, re-run, kept aside; never a traceback ---------------------------------------

def _damage(path: Path) -> bytes:
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 3])  # truncated, as a full disk or a killed copy leaves it
    return original


@pytest.mark.parametrize("victim", [METRICS, "spec.json"])
def test_a_finished_run_that_cannot_be_read_is_reported_around_then_rerun_with_its_files_kept(capsys, tmp_path, victim):
    argv = ["--grid", "smoke", "--backbone", "pixels", "--methods", "K-means", "Baseline", "--results", str(tmp_path),
            "--cfg-options", "method.epochs=2", "dataset.num_classes=6", "dataset.image_size=8",
            "dataset.train_per_class=12", "dataset.test_per_class=6", "features.views=2"]
    assert main(["run", "--cluster", "debug", *argv]) == 0
    kmeans = next(d for d in (tmp_path / "runs").iterdir() if '"K-means"' in (d / "spec.json").read_text())
    original = _damage(kmeans / victim)
    (kmeans / "predictions.npz").unlink()  # recorded before runs kept them: nothing to rebuild the metrics from
    capsys.readouterr()

    # the report goes on without it and says which file it could not read
    assert main(["report", "--format", "csv", *argv]) == 0
    _, err = capsys.readouterr()
    if victim == METRICS:
        assert f"skipping run {kmeans.name}: cannot read {kmeans / METRICS}" in err and "Traceback" not in err
        table = pd.read_csv(tmp_path / "reports" / "smoke" / "table.csv")
        assert set(table["method"]) == {"Baseline"}

    # bench run names it, runs it again, and keeps the damaged files aside
    assert main(["run", "--cluster", "debug", *argv]) == 0
    out, err = capsys.readouterr()
    assert f"run {kmeans.name} (K-means" in err and f"{kmeans / victim}" in err and "Traceback" not in err
    assert "running 1 on debug" in out and "K-means (reference)" in out
    (aside,) = kmeans.glob("damaged-*")
    assert (aside / victim).read_bytes() == original[: len(original) // 3] and (aside / DONE).exists()
    assert pd.read_parquet(kmeans / METRICS)["value"].notna().all() and (kmeans / DONE).exists()
    assert main(["run", "--cluster", "debug", *argv]) == 0
    assert "all 2 runs already done" in capsys.readouterr().out


def test_an_unreadable_checkpoint_is_set_aside_and_the_run_starts_over(tmp_path):
    (spec,) = tiny_specs(methods=["K-means"])
    out = run_dir(tmp_path, spec)
    out.mkdir(parents=True)
    (out / CHECKPOINT).write_bytes(b"not a checkpoint")
    execute(spec, tmp_path)
    assert (out / DONE).exists() and not (out / CHECKPOINT).exists()
    (aside,) = out.glob("damaged-*")
    assert (aside / CHECKPOINT).read_bytes() == b"not a checkpoint"
    assert "checkpoint unreadable" in (out / "log.txt").read_text()


def test_report_without_a_grid_reports_what_was_just_run(capsys, tmp_path):
    """An ad-hoc `bench run --methods ... --cfg-options ...` is what a bare `bench report` shows."""
    argv = ["--grid", "smoke", "--backbone", "pixels", "--methods", "K-means", "--results", str(tmp_path)]
    assert main(["run", "--cluster", "debug", *argv, "--cfg-options", "dataset.num_classes=4"]) == 0
    capsys.readouterr()
    assert main(["report", "--results", str(tmp_path), "--format", "markdown"]) == 0
    out, _ = capsys.readouterr()
    assert "no --grid given: reporting the 1 finished run(s)" in out and "(K-means on synthetic)" in out
    assert "K-means" in (tmp_path / "reports" / "all" / "table.md").read_text()
    assert main(["report", "--results", str(tmp_path), "--methods", "Baseline"]) == 2  # nothing matches
    assert "no finished runs under" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    # a name that only maps onto a method's slug by the slug rule is not that method
    (["--methods", "Baseline+"], "unknown method 'Baseline+'; known: Baseline, Baseline++"),
    (["--methods", "joint frozen"], "did you mean 'Joint (frozen)'"),
    (["--datasets", "cifar"], "unknown dataset 'cifar'; known: aircraft, cars, cifar10, cifar100, cub200, digits, "
                              "domainnet, herbarium19, imagenet100, synthetic, tinyimagenet; did you mean 'cifar10', 'cifar100' or "
                              "'cars'?"),
    (["--grid", "dmo"], "unknown grid 'dmo'; known: backbones, cgcd, cgcd-demo, cgcd-drift-smoke, cgcd-smoke, demo, full, happy-tables, paper, promptccd-tables, smoke, vb-cgcd-tables; "
                        "did you mean 'demo'?"),
    (["--splits", "5-steps"], "did you mean '5-step'"),
    (["--methods", "Baseline:equation"], "unknown preset of Baseline 'equation'; known: code, equations, no_cosnorm; "
                                         "did you mean 'equations'?"),
])
def test_an_unknown_name_is_refused_with_the_closest_valid_ones(argv, said, capsys):
    from bench.cli import main

    assert main(["run", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err


def test_a_slug_in_any_case_names_its_method():
    from bench.config.spec import resolve_method

    assert resolve_method("Joint-Frozen") == resolve_method("joint-frozen") == "Joint (frozen)"
    assert resolve_method("BASELINE-PP") == "Baseline++"


@pytest.mark.parametrize("argv, said", [
    (["rnu"], "unknown command 'rnu'; known: cache, cancel, check, data, list, metrics, new, publish, report, run, "
              "status, store, tune, weights, worker; did you mean 'run'?"),
    (["reprot", "--format", "csv"], "did you mean 'report'?"),
    (["run", "--dry-run", "--cfg-options", "method.epoch=5"], "did you mean 'method.epochs'"),
    (["run", "--dry-run", "--cfg-options", "featurs.views=4"], "unknown section 'featurs'; valid sections: "),
    (["run", "--dry-run", "--cfg-options", "features.view=4"], "did you mean 'features.views'"),
    (["run", "--dry-run", "--cfg-options", "setting.k=brent"], "the setting section's keys are a mixed split's"),
    (["run", "--dry-run", "--splits", "happy-5-stage", "--cfg-options", "setting.arival=happy"],
     "'arival' is not a known key; valid keys: .*; did you mean 'setting.arrival'\\?"),
])
def test_an_unknown_command_or_config_key_is_refused_with_the_closest_valid_ones(capsys, argv, said):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(said, err) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("text, digits", [("0", True), ("0042", True), (7, True), ("", False), ("²", False),
                                          ("١٢", False), ("1.5", False), ("-1", False), (" 1", False)])
def test_ascii_digits_admits_only_the_digits_int_reads(text, digits):
    """The one check every count of a header, a file or an option passes (`bench.errors.ascii_digits`)."""
    from bench.errors import ascii_digits

    assert ascii_digits(text) is digits
    if digits:
        assert int(str(text)) >= 0
