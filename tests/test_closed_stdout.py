"""`bench run ... | head`: a reader that leaves early never fails a run. The runs go on and finish
with complete logs, only the echo stops, and the exit status still says whether every run finished."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_run_piped_into_head_finishes_every_run(tmp_path):
    bench = f"{sys.executable} -m bench.cli run --grid demo --cluster debug --methods K-means --splits 2-step "\
            f"--seeds 0 1 --results {tmp_path}"
    out = subprocess.run(["bash", "-c", f"{bench} | head -1; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert out.stdout.startswith("grid demo, narrowed by --methods --splits --seeds: 2 runs")
    assert len(out.stdout.splitlines()) == 1
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2
    for run in runs:
        assert (run / "DONE").exists() and not (run / "error.txt").exists()
        assert "done: A=" in (run / "log.txt").read_text().splitlines()[-1]
