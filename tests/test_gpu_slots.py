"""Every GPU of one machine (bench/execution/gpus.py): the local pool places one warm worker per GPU slot, each
seeing its own GPU alone. The machine's GPUs are faked here (CUDA counts none on the test machines); the pool
itself, each worker with its own slot, is tests/test_workers.py's first test."""
from __future__ import annotations

import pytest
import torch

from bench.core.provenance import gpu_of
from bench.errors import BenchError
from bench.execution import gpus
from bench.execution.preflight import local_slots


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.setattr(gpus, "visible_gpus", lambda: ["0", "1", "2", "3"])


def test_slots_are_every_visible_gpu_or_the_ones_asked_for(four_gpus):
    assert gpus.gpu_slots(None) == ["0", "1", "2", "3"]
    assert gpus.gpu_slots(["all"]) == ["0", "1", "2", "3"]
    assert gpus.gpu_slots(["1", "3"], per_gpu=2) == ["1", "1", "3", "3"]
    assert gpus.gpu_slots(None, device="cpu") == []  # runs on the CPU hold no GPU
    with pytest.raises(BenchError, match=r"no visible GPU 7; visible here: 0, 1, 2, 3"):
        gpus.gpu_slots(["7"])
    with pytest.raises(BenchError, match=r"no visible GPU ²; visible here: 0, 1, 2, 3 \(or indices 0-3, or all\)"):
        gpus.gpu_slots(["²"])  # a digit to str.isdigit, not to int()
    with pytest.raises(BenchError, match="names a GPU twice; to share a GPU use --runs-per-gpu"):
        gpus.gpu_slots(["1", "1"])
    with pytest.raises(BenchError, match="--runs-per-gpu 0"):
        gpus.gpu_slots(None, per_gpu=0)
    with pytest.raises(BenchError, match="--device cuda:1 on one device"):
        gpus.gpu_slots(["1"], device="cuda:1")
    with pytest.raises(BenchError, match="--workers 3 with 4 GPU slot"):
        local_slots("local", None, 1, None, 3)
    with pytest.raises(BenchError, match="--cluster slurm places its runs itself"):
        local_slots("slurm", "0,1", 1, None, None)
    assert local_slots("local", "2,0", 1, None, 2) == ["2", "0"]


def test_names_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setattr(gpus, "driver_present", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")
    assert gpus.visible_gpus() == ["GPU-aa", "GPU-bb"]
    assert gpus.gpu_slots(["1"]) == ["GPU-bb"]  # an index means the parent's n-th visible GPU
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus.visible_gpus() == ["0", "1"]
    # what a run records: the machine's name for the GPU it computed on
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert gpu_of(torch.device("cuda", 1)) == "5" and gpu_of(torch.device("cuda")) == "3"
    assert gpu_of(torch.device("cpu")) == ""


def test_a_machine_without_gpus_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "NVIDIA_GPUS", tmp_path / "no-driver")  # no NVIDIA driver: torch is not even asked
    monkeypatch.setattr(gpus, "DEVICES", tmp_path)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1 / 0)
    assert gpus.visible_gpus() == [] and local_slots("local", None, 1, None, None) == []
    with pytest.raises(BenchError, match="this machine has no CUDA device"):
        local_slots("local", "0", 1, None, None)
    (tmp_path / "nvidia0").touch()  # a container handed a GPU sees its device node
    assert gpus.driver_present()
