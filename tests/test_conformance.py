"""The conformance kit (`bench check method`) and the templates (`bench new`): every built-in method
and the template pass the kit; methods that break the protocol fail the check that says so."""
from __future__ import annotations

import re

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.kit.conformance import TINY_OPTIONS, Check, run_checks, settings_of
from bench.kit.probes import StepSpy
from bench.errors import BenchError
from bench.features.views import FeatureViews
from bench.methods.base import Step
from bench.methods.baseline import Baseline
from bench.registries import DATASETS, METHODS, load_all
from bench.kit.scaffold import new

load_all()
BUILT_IN = sorted(name for name in METHODS.module_dict if not name.startswith("_"))
TEMPLATE = "kit-template"
PER_SETTING = 8  # lines `bench check method` prints for each setting a method declares, after `presets validate`


def lines_for(method: str) -> int:
    return 1 + PER_SETTING * len(settings_of(method))


@pytest.fixture(scope="module")
def bank(tmp_path_factory: Any) -> Path:
    """One feature bank for every method's kit: they all run the same tiny smoke data."""
    return tmp_path_factory.mktemp("bank")


def import_file(path: Path) -> Any:
    """Import a generated file by path, as its own test does (what `--include DIR` will do)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def failed(checks: list[Check]) -> dict[str, str]:
    """Each failed check's reason, by its title (`[incd] no labels reach it`)."""
    return {c.title: c.reason for c in checks if not c.ok}


@pytest.mark.parametrize("method", [*BUILT_IN, TEMPLATE])
def test_every_method_and_the_template_pass_the_kit(method: str, tmp_path: Path, bank: Path) -> None:
    if method == TEMPLATE:
        # the template's own test, as `bench new` wrote it, runs the kit on the template
        written = new("method", TEMPLATE, tmp_path / "plugin")
        generated_test = import_file(next(p for p in written if p.name.startswith("test_")))
        try:
            generated_test.test_kit_template_obeys_the_protocol(tmp_path / "kit")  # asserts that no check fails
        finally:  # registered only for this test: a catalogue written later must not list it
            METHODS.module_dict.pop(TEMPLATE, None)
        return
    checks = list(run_checks(method, tmp_path, bank))
    assert len(checks) == lines_for(method) and not failed(checks), [c.line() for c in checks]


# -- methods that break the protocol, each in one way --

class LabelPeeker(Baseline):
    """Reads the training labels behind the runner's back (it loads the dataset itself) and lets them
    decide its task-specific answer: no Step carries a label, only the permuted run can tell."""

    def learn(self, step: Step) -> None:
        super().learn(step)
        import bench.protocol.planning

        options = {k.split(".", 1)[1]: v for k, v in TINY_OPTIONS.items() if k.startswith("dataset.")}
        labels = bench.protocol.planning.build_dataset("synthetic", options).train.labels
        self.peeked = int(labels[0])

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        scores = torch.zeros(len(x), self.heads[task].weight.shape[0])
        scores[:, self.peeked % scores.shape[1]] = 1.0
        return scores


class Forgetful(Baseline):
    """Its state_dict loses the last step's head: a reloaded instance answers differently."""

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["heads"] = [*state["heads"][:-1], torch.zeros_like(state["heads"][-1])]
        return state


class Unseeded(Baseline):
    """Answers with noise drawn from the operating system: the same seed gives other numbers."""

    @torch.no_grad()
    def task_logits(self, x: torch.Tensor, task: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        return torch.rand(len(x), self.heads[task].weight.shape[0], generator=gen)


class MovesOldHeads(Baseline):
    """Declares frozen task heads (as Baseline does) but rolls every earlier head's rows at each step: its old
    clusters get other ids, so a re-fitted map would differ from the frozen one, and reusing the answers of
    each head's own step (what the declaration lets class-iNCD's evaluation do) would hide that."""

    def learn(self, step: Step) -> None:
        super().learn(step)
        with torch.no_grad():
            for head in self.heads[:-1]:
                head.weight.copy_(head.weight.roll(1, 0))


class OneColumn(Baseline):
    """Answers with one column whatever the classes: every image is class 0 (a run would finish, A = 1/C)."""

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return super().logits(x)[:, :1]


class BrokenLabelledStep(Baseline):
    """Declares both settings (as Baseline does), but its labelled-step branch raises: only a run of the mixed
    setting, whose first step hands `step.labels`, takes that branch."""

    def learn(self, step: Step) -> None:
        if step.labels is not None:
            raise RuntimeError("the labelled step's branch is broken")
        super().learn(step)


@pytest.fixture
def registered() -> Iterator[None]:
    names = {"_kit-label-peeker": LabelPeeker, "_kit-forgetful": Forgetful, "_kit-unseeded": Unseeded,
             "_kit-one-column": OneColumn, "_kit-moves-old-heads": MovesOldHeads,
             "_kit-broken-labelled-step": BrokenLabelledStep}
    for name, cls in names.items():
        METHODS.register_module(name=name, module=cls, force=True)
    yield
    for name in names:
        METHODS.module_dict.pop(name, None)


def test_a_method_that_reads_labels_fails_the_permuted_labels_check(registered: None, tmp_path: Path,
                                                                    bank: Path) -> None:
    bad = failed(list(run_checks("_kit-label-peeker", tmp_path, bank)))
    assert "[incd] its outputs ignore the training labels" in bad and "[incd] no labels reach it" not in bad
    assert "differ with the labels permuted" in bad["[incd] its outputs ignore the training labels"]


def test_a_state_dict_that_loses_state_fails_round_trip_and_resume(registered: None, tmp_path: Path,
                                                                   bank: Path) -> None:
    bad = failed(list(run_checks("_kit-forgetful", tmp_path, bank)))
    assert set(bad) == {f"[{setting}] {name}" for setting in ("incd", "mixed")  # it loses state in both settings
                        for name in ("state_dict round-trips", "a killed run resumes to identical metrics")}, bad
    assert "logits of the reloaded instance differs" in bad["[incd] state_dict round-trips"]


def test_a_method_that_moves_the_heads_it_declares_frozen_fails_that_check(registered: None, tmp_path: Path,
                                                                          bank: Path) -> None:
    assert MovesOldHeads.runs_on.frozen_task_heads
    bad = failed(list(run_checks("_kit-moves-old-heads", tmp_path, bank)))
    assert set(bad) == {"[incd] earlier task heads answer as at their own step"}, bad
    assert bad["[incd] earlier task heads answer as at their own step"].startswith(
        "after step 2, task_logits(task 1) answers otherwise than after step 1")


def test_an_unseeded_method_fails_the_same_seed_check_and_the_command_says_so(registered: None, capsys: Any,
                                                                              bank: Path) -> None:
    assert main(["check", "method", "_kit-unseeded"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == lines_for("_kit-unseeded") and all(line.startswith(("PASS ", "FAIL ")) for line in lines)
    assert any(line.startswith("FAIL [incd] the same seed gives the same numbers: ") for line in lines)
    assert "PASS presets validate" in lines


def test_a_method_of_both_settings_is_checked_in_each_and_a_broken_labelled_step_fails(registered: None,
                                                                                     capsys: Any, bank: Path) -> None:
    assert BrokenLabelledStep.runs_on.settings == ("incd", "mixed")
    assert main(["check", "method", "_kit-broken-labelled-step"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 2 * PER_SETTING, lines
    assert [line for line in lines if line.startswith("FAIL ")] == [
        "FAIL [mixed] runs on the smoke grid (features): RuntimeError: the labelled step's branch is broken",
        *(f"FAIL [mixed] {name}: not run: the smoke run failed" for name in (
            "no labels reach it", "no earlier step's data reach it", "its outputs ignore the training labels",
            "state_dict round-trips", "earlier task heads answer as at their own step",
            "a killed run resumes to identical metrics", "the same seed gives the same numbers"))]
    assert lines[1:1 + PER_SETTING] == [line for line in lines if line.startswith("PASS [incd] ")]  # class-iNCD first


def test_the_kit_leaves_the_method_classes_as_they_were(tmp_path: Path, bank: Path) -> None:
    from bench.methods.baseline_pp import BaselinePlusPlus

    before = {name: dict(vars(cls)) for name, cls in (("Baseline++", BaselinePlusPlus), ("Baseline", Baseline))}
    assert "bind" not in before["Baseline++"]  # inherited (Method.bind): the kit must not pin a copy there
    list(run_checks("Baseline++", tmp_path, bank))
    assert {"Baseline++": dict(vars(BaselinePlusPlus)), "Baseline": dict(vars(Baseline))} == before


def test_the_spy_finds_labels_and_earlier_steps_in_a_step() -> None:
    from bench.data.base import ImageSet

    class Holder:  # a token source that kept the labels of its images
        def __init__(self) -> None:
            self.images = ImageSet(np.zeros((2, 4, 4, 3), np.uint8), np.array([0, 1]))

    x = torch.zeros(2, 3)
    step = Step(index=1, n_classes=2, offset=2, train=FeatureViews(x, x[:, None]), past=[FeatureViews(x, x[:, None])],
                tokens=Holder())
    spy = StepSpy(Baseline)
    spy.inspect(step)
    assert spy.label_fields == ["step 2.tokens.images.labels"]
    assert spy.past_fields == ["step 2.past holds 1 step(s)"]
    clean = StepSpy(Baseline)
    clean.inspect(Step(index=0, n_classes=2, offset=0, train=FeatureViews(x, x[:, None])))
    assert clean.label_fields == [] and clean.past_fields == []


def test_a_preset_file_without_equations_fails_presets_validate(tmp_path: Path) -> None:
    written = new("method", "kit-no-equations", tmp_path)
    preset = next(p for p in written if p.parent.name == "presets")
    preset.write_text(preset.read_text().replace("equations = dict(", "paper = dict("))
    try:
        import_file(written[0])
        checks = list(run_checks("kit-no-equations", tmp_path / "kit"))
    finally:
        METHODS.module_dict.pop("kit-no-equations", None)
    assert len(checks) == 1 + PER_SETTING  # the template runs class-iNCD only
    assert failed(checks)["presets validate"].startswith("kit_no_equations.py lacks equations (required)")
    assert all(reason.startswith(("its presets", "not run")) for name, reason in failed(checks).items()
               if name != "presets validate")


def test_an_override_with_a_bad_value_fails_presets_validate(tmp_path: Path) -> None:
    written = new("method", "kit-bad-override", tmp_path)
    preset = next(p for p in written if p.parent.name == "presets")
    preset.write_text(preset.read_text() + 'overrides = dict(code={"cifar10/5-step": dict(epochs=0)})\n')
    try:
        import_file(written[0])
        checks = list(run_checks("kit-bad-override", tmp_path / "kit"))
    finally:
        METHODS.module_dict.pop("kit-bad-override", None)
    assert failed(checks)["presets validate"] == ("preset 'code' on cifar10 5-step: bad config value method.epochs=0: "
                                                  "must be an integer >= 1")


# -- bench new --

def test_new_dataset_writes_a_reader_whose_test_passes(tmp_path: Path) -> None:
    written = new("dataset", "kit-npz", tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["kit_npz.py", "test_kit_npz.py"]
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    try:
        generated_test = import_file(written[1])
        generated_test.test_kit_npz_reads_its_format(tmp_path / "one")
        generated_test.test_kit_npz_says_what_is_missing(tmp_path / "two")
    finally:
        DATASETS.module_dict.pop("kit-npz", None)


@pytest.mark.parametrize("name, says", [
    ("a b", "bad name 'a b': use 1 to 40 letters, digits, '-' or '_', starting with a letter"),
    ("1st", "bad name '1st'"), ("class", "'class' is a Python keyword"),
    ("baseline", "a method named 'Baseline' is already registered"),
    ("baseline-pp", "a method named 'Baseline++' is already registered (or has the slug 'baseline-pp')"),
    ("Joint_frozen", "a method named 'Joint (frozen)' is already registered"),
    ("finetuned", "bench has a preset file named 'finetuned' \\(.*finetuned.py\\); a new method's "
                  "presets/finetuned.py could not take that name"),
])
def test_new_refuses_bad_names(name: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(BenchError, match=says if ".*" in says else re.escape(says)):
        new("method", name, tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("case", ["dir is a file", "presets is a file", "read-only dir"])
def test_new_checks_every_file_can_be_written_before_writing_any(tmp_path: Path, capsys: Any, case: str) -> None:
    import subprocess

    target = tmp_path / "plugins"
    if case == "dir is a file":
        target.write_text("")
        said = f"cannot write {target / 'mine.py'}: {target} is a file, where {target / 'mine.py'} needs a folder"
    elif case == "presets is a file":
        target.mkdir()
        (target / "presets").write_text("")
        said = f"cannot write {target / 'presets' / 'mine.py'}: {target / 'presets'} is a file"
    else:
        target.mkdir()
        made = subprocess.run(f"mount --bind {target} {target} && mount -o remount,bind,ro {target}", shell=True,
                              capture_output=True)
        if made.returncode != 0:
            pytest.skip("this machine does not let the suite make a read-only bind mount")
        said = f"cannot write {target / 'mine.py'}: {target} does not take new files (Read-only file system)"
    try:
        assert main(["new", "method", "mine", "--dir", str(target)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"bench: error: {said}") and "Traceback" not in err and "\n" not in err
        assert not (target / "mine.py").exists() and not (target / "test_mine.py").exists()
    finally:
        if case == "read-only dir":
            subprocess.run(["umount", str(target)], capture_output=True)


@pytest.fixture
def fresh_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that loads a plugin folder (`--include`) leaves nothing of it behind: its methods, its modules, the
    folder on sys.path, the catalogue cached from it (its own cache directory)."""
    from bench.registries import catalogue, plugins

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    before = set(METHODS.module_dict)
    yield
    for name in set(METHODS.module_dict) - before:
        if not METHODS.module_dict[name].__module__.startswith("bench."):  # bench's own, loaded lazily, stay
            del METHODS._module_dict[name]
    for module in [m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "") or "").startswith(str(tmp_path))]:
        del sys.modules[module]
    plugins.reset()
    catalogue.catalogue.cache_clear()


def test_new_method_of_the_mixed_setting_passes_bench_check_as_written(fresh_plugins: None, tmp_path: Path,
                                                                       capsys: Any) -> None:
    folder = tmp_path / "ccd"
    assert main(["new", "method", "kit-ccd", "--setting", "mixed", "--dir", str(folder)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {folder / 'kit_ccd.py'}",
                                                    f"wrote {folder / 'presets' / 'kit_ccd.py'}",
                                                    f"wrote {folder / 'test_kit_ccd.py'}"]
    code = (folder / "kit_ccd.py").read_text()
    assert 'settings=("mixed",)' in code and "if step.labels is not None:" in code and "step.selection.over(" in code
    assert main(["check", "method", "kit-ccd", "--include", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "PASS presets validate" and len(lines) == 1 + PER_SETTING, lines
    assert all(line.startswith("PASS [mixed] ") for line in lines[1:]), lines
    assert "PASS [mixed] no labels reach it after the labelled step" in lines


def test_new_takes_a_setting_for_a_method_only(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(BenchError, match="--setting is for a method: a dataset serves every setting"):
        new("dataset", "kit-npz-2", tmp_path, setting="mixed")
    with pytest.raises(BenchError, match="unknown setting 'ccd'; bench new method writes: incd, mixed"):
        new("method", "kit-ccd-2", tmp_path, setting="ccd")
    assert not any(tmp_path.iterdir())
    with pytest.raises(SystemExit):
        main(["new", "method", "kit-ccd-2", "--setting", "ccd", "--dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--setting: invalid choice: 'ccd'" in err and "mixed" in err
    written = new("method", "kit-incd-default", tmp_path)  # the default stays class-iNCD's template
    assert "settings=" not in written[0].read_text() and "def task_logits" in written[0].read_text()


def test_a_directory_named_like_a_module_in_a_plugin_folder_is_no_plugin(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "odd.py").mkdir()
    (tmp_path / "presets" / "odd2.py").mkdir(parents=True)
    assert main(["list", "methods", "--include", str(tmp_path)]) == 0
    assert "Baseline" in capsys.readouterr().out


def test_new_never_overwrites_and_writes_nothing_then(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.py").write_text("# someone's work\n")
    assert main(["new", "method", "mine", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"bench: error: {tmp_path / 'presets' / 'mine.py'} exists; bench new never overwrites a file "
                   f"(remove it or choose another name or --dir)")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["mine.py", "presets"]  # nothing else written
    assert (tmp_path / "presets" / "mine.py").read_text() == "# someone's work\n"
    assert main(["new", "dataset", "mine", "--dir", str(tmp_path / "data")]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path / 'data' / 'mine.py'}",
                                                    f"wrote {tmp_path / 'data' / 'test_mine.py'}"]


def test_a_method_with_wrong_shaped_logits_fails_its_run_and_the_kit(registered: None, tmp_path: Path,
                                                                    bank: Path) -> None:
    from bench.protocol.runner import execute
    from bench.runs.rundir import ERROR
    from tests.helpers import tiny_specs

    (spec,) = tiny_specs(methods=["_kit-one-column"])
    with pytest.raises(BenchError, match=r"method OneColumn: logits of \d+ images after step 1 has shape "
                                         r"\(\d+, 1\), not \d+ × 3 \(one column per class seen so far\)"):
        execute(spec, tmp_path / "run")
    assert "method OneColumn: logits" in next((tmp_path / "run" / "runs").glob(f"*/{ERROR}")).read_text()
    bad = failed(list(run_checks("_kit-one-column", tmp_path / "kit", bank)))
    assert "has shape" in bad["[incd] runs on the smoke grid (features)"]
    assert "has shape" in bad["[mixed] runs on the smoke grid (features)"]
