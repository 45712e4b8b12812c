"""What decides a run's floating-point results besides its spec, fixed by the runner for every run.

The CPU compute threads: a reduction split over N threads adds in another order than over M, so a
run's numbers depend on N (EwC on the smoke grid moved by up to 46.7 points between 1 and 2). N is
therefore a property of the run (`bench run --threads`, default `DEFAULT_THREADS`), never of where it
runs: not the machine's cores, not the pool's share of them, not a SLURM node. It is set at the start
of every run, stored in its checkpoint and resumed with. On CUDA the kernels are made deterministic
too. Bit-identical results then hold on the same machine, GPU and library versions, not across them.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from bench.errors import BenchError, ascii_digits

if TYPE_CHECKING:
    import torch

DEFAULT_THREADS = 1  # a constant: the local pool runs one worker per core, so a grid still uses every core
CUBLAS_CONFIG = ":4096:8"  # what cuBLAS needs to be deterministic (CUDA's documentation; ":16:8" too)


def available_cores() -> int:
    """The cores this process may use: the CPU affinity (which containers and core-binding clusters set),
    else the machine's; in a SLURM job at most `SLURM_CPUS_PER_TASK` (a cluster that does not bind tasks
    to cores leaves a job's affinity at the whole node)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return min(cores, int(slurm)) if ascii_digits(slurm) and int(slurm) >= 1 else cores


# The largest seed a run takes: the runner seeds step t with `seed * 1000 + t` (torch takes 64 bits, numpy's legacy
# generator 32: `seed_everything` wraps it), so that a seed fits 32 bits unsigned keeps every step's seed in reach
MAX_SEED = 2**32 - 1


def check_seed(seed: int, what: str = "--seeds") -> None:
    """A run's seed: an integer in 0 .. MAX_SEED, refused before any run starts (it failed each run once begun)."""
    if not 0 <= seed <= MAX_SEED:
        raise BenchError(f"{what} {seed}: a seed must be an integer from 0 to {MAX_SEED} (2**32 - 1)")


def sklearn_seed(seed: int) -> int:
    """`seed` as scikit-learn takes it (`random_state`: 0 .. 2**32 - 1). A step's seed is `seed * 1000 + t`, which
    passes 2**32 for seeds above 4294966; below that the value is `seed` itself, so no result changes."""
    return seed % 2**32


def check_threads(threads: int) -> None:
    if threads < 1:
        raise BenchError(f"--threads {threads}: must be an integer >= 1 (CPU compute threads of each run, "
                         f"default {DEFAULT_THREADS})")


def _settings() -> dict[str, Any]:
    import torch

    return {"threads": torch.get_num_threads(), "matmul": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "cudnn_benchmark": torch.backends.cudnn.benchmark, "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32}


def _apply(settings: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(settings["threads"])
    torch.set_float32_matmul_precision(settings["matmul"])
    if (settings["deterministic"], settings["warn_only"]) != (torch.are_deterministic_algorithms_enabled(),
                                                              torch.is_deterministic_algorithms_warn_only_enabled()):
        # only when it changes: the call imports torch._inductor (about a second of a short job's CPU time)
        torch.use_deterministic_algorithms(settings["deterministic"], warn_only=settings["warn_only"])
    torch.backends.cudnn.benchmark = settings["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = settings["cudnn_deterministic"]
    torch.backends.cudnn.allow_tf32 = settings["cudnn_tf32"]


def _load_thread_pools() -> None:
    """Load the libraries whose thread pools a run can use, so that `threadpool_limits` reaches them:
    it only sees pools already loaded, and scikit-learn's OpenMP and scipy's OpenBLAS are otherwise
    first loaded by K-means' lazy import, at every core, in a worker's first run."""
    import scipy.linalg  # noqa: F401  (scipy's OpenBLAS)
    import sklearn.cluster  # noqa: F401  (scikit-learn's OpenMP)


@contextmanager
def restored() -> Iterator[None]:
    """What `fix` changes (torch's threads and kernels, the BLAS and OpenMP pools) as it was before,
    after the body: an in-process caller (a test, a notebook) gets its own settings back."""
    from threadpoolctl import threadpool_limits

    before = _settings()
    pools = threadpool_limits(limits=None)  # changes nothing; remembers the pools' sizes
    try:
        yield
    finally:
        pools.restore_original_limits()
        _apply(before)


def fix(threads: int, device: "torch.device") -> list[str]:
    """Set what decides the run's numbers for `threads` CPU threads on `device`; what was set, for its log.
    Call inside `restored()`."""
    import torch
    from threadpoolctl import threadpool_limits

    _load_thread_pools()
    threadpool_limits(threads)  # numpy's BLAS, scikit-learn's OpenMP (K-means): their sums split by threads too
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest")  # torch's default: a caller's TF32/bf16 choice is not the run's
    torch.backends.cudnn.allow_tf32 = False  # likewise for convolutions (a ResNet backbone on CUDA)
    said = [f"{threads} CPU compute thread(s), float32 matmuls at 'highest' precision"]
    if device.type != "cuda":
        return said
    # read when torch first creates a cuBLAS handle: set before the run's first CUDA op (a process that
    # used CUDA before, without it, keeps its workspace: said below)
    late = "CUBLAS_WORKSPACE_CONFIG" not in os.environ and torch.cuda.is_initialized()
    cublas = os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_CONFIG)
    # warn_only: some backward kernels the methods can reach have no deterministic CUDA version (the
    # adaptive average pool of a ResNet tail, scatter-adds): strict mode would fail those runs; torch
    # warns in the job's stderr naming the op instead, and every other op runs its deterministic kernel
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False  # autotuning picks kernels by timing: another pick, other numbers
    torch.backends.cudnn.deterministic = True
    said.append(f"CUDA: deterministic algorithms (warn_only), cudnn.benchmark off, cudnn.deterministic on, "
                f"CUBLAS_WORKSPACE_CONFIG={cublas}")
    if cublas not in (CUBLAS_CONFIG, ":16:8"):
        said.append(f"WARNING: CUBLAS_WORKSPACE_CONFIG is {cublas!r} from the environment, not {CUBLAS_CONFIG!r}: "
                    f"cuBLAS may not be deterministic")
    if late:
        said.append("WARNING: CUDA was used in this process before CUBLAS_WORKSPACE_CONFIG was set: cuBLAS may not "
                    "be deterministic (`bench run` sets it in time)")
    return said
