"""SLURM planning without a cluster: profiles, overrides, key validation, grouping and chunking."""
from __future__ import annotations

import dataclasses

import pytest

from bench.errors import BenchError
from bench.execution.slurm import load_profile, plan, sacct_states, validate_params
from tests.helpers import tiny_specs


def test_profiles_merge_default_method_and_command_line():
    profile = load_profile("default")
    assert profile.params_for("Baseline", {})["gpus_per_node"] == 1
    assert profile.params_for("K-means", {})["gpus_per_node"] == 0  # per-method override
    assert profile.params_for("K-means", {"gpus_per_node": 2})["gpus_per_node"] == 2  # command line wins
    local = load_profile("local")  # inherits default through _base_
    assert local.params_for("Baseline", {})["cpus_per_task"] == 1
    assert local.params_for("Baseline", {})["slurm_setup"] == []


def test_unknown_profile_and_unknown_option_are_refused_with_the_valid_choices():
    with pytest.raises(BenchError, match="unknown SLURM profile 'nope'; known: default, local"):
        load_profile("nope")
    with pytest.raises(BenchError, match="unknown SLURM option 'slurm_partitionz'; valid options: .*slurm_partition"):
        validate_params({"slurm_partitionz": "gpu"})
    with pytest.raises(BenchError, match="unknown SLURM option 'walltime'"):
        validate_params({"walltime": 10})


def test_runs_are_grouped_by_resources_and_chunked_to_the_array_limit():
    specs = tiny_specs(methods=["Baseline", "K-means"], seeds=range(5))
    profile = dataclasses.replace(load_profile("default"), max_array_size=3)
    chunks = plan(specs, profile, {})
    sizes = sorted((params["gpus_per_node"], len(tasks)) for params, tasks in chunks)
    assert sizes == [(0, 2), (0, 3), (1, 2), (1, 3)]
    for params, tasks in chunks:
        assert all(len(task) == 1 for task in tasks)  # unpacked: a run per array task
        assert {s.method for (s,) in tasks} == ({"K-means"} if params["gpus_per_node"] == 0 else {"Baseline"})


def test_a_bad_override_fails_before_anything_is_submitted():
    with pytest.raises(BenchError, match="unknown SLURM option 'gpus'"):
        plan(tiny_specs(), load_profile("default"), {"gpus": 1})


def test_sacct_output_is_parsed_including_pending_array_ranges(monkeypatch):
    import subprocess

    class Done:
        returncode = 0
        stdout = "12_0|COMPLETED\n12_1|RUNNING\n12_[2-4%2]|PENDING\n13|CANCELLED by 0\n"

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/sacct")
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or Done())
    states = sacct_states(["12_0", "12_1", "12_2", "12_4", "13"])
    assert len(calls) == 1 and calls[0][-1] == "12,13"  # one batched query
    assert states == {"12_0": "COMPLETED", "12_1": "RUNNING", "12_2": "PENDING", "12_3": "PENDING",
                      "12_4": "PENDING", "13": "CANCELLED"}


def test_only_a_submitit_job_process_ends_without_the_interpreters_teardown(monkeypatch):
    """A job ends with os._exit once submitit has written its result (its teardown took ~1.4 s a job);
    a caller running SlurmRun in-process (a test, pytest itself) must keep its own exit, status included."""
    import sys
    import types

    import bench.execution.job_exit as job_exit

    registered = []
    monkeypatch.setattr(job_exit.atexit, "register", registered.append)
    job_exit.end_job_without_teardown()
    assert registered == []  # pytest's __main__ is not submitit's
    job_main = types.SimpleNamespace(__spec__=types.SimpleNamespace(name="submitit.core._submit"))
    monkeypatch.setitem(sys.modules, "__main__", job_main)
    job_exit.end_job_without_teardown()
    assert registered == [job_exit.end_without_teardown]


def test_a_profile_that_does_not_load_is_one_line(tmp_path, monkeypatch):
    """A site profile in ./slurm/profiles whose `_base_` is not beside it: one line naming the file."""
    from bench.errors import BenchError
    from bench.execution.slurm import load_profile

    (tmp_path / "slurm" / "profiles").mkdir(parents=True)
    (tmp_path / "slurm" / "profiles" / "site.py").write_text('_base_ = ["./default.py"]\ndefault = dict(mem_gb=8)\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchError, match=r"^SLURM profile .*site\.py: FileNotFoundError: ") as caught:
        load_profile("site")
    assert "\n" not in str(caught.value)
