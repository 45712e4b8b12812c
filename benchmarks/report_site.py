"""The html report at scale: `bench report` over generated results of the `full` grid (the paper's
116 cells) at several seed counts, its time and the site's size, then the site opened in headless
Chromium (the time to its load event and to a sort of its largest leaderboard).

    python benchmarks/report_site.py [--seeds 3 10 30] [--dir /tmp/report-site] [--no-browser]

The runs are generated, not trained: each gets a spec.json (the grid's own spec), a log, a
metrics.parquet with the runner's rows (every group, flavour and metric, the provenance columns) and
its DONE marker; 2% of them fail (error.txt, no DONE) and 1% never ran, as on a real cluster.
Needs Debian's `chromium` for the browser part (tests/chromium.py drives it).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bench  # noqa: E402
from bench.config.grids import expand, load_grid  # noqa: E402

PROVENANCE = {"bench_version": "0.1.0", "git_commit": "0" * 40, "host": "node042", "device": "NVIDIA H100",
              "slurm_job_id": "123456_7", "started_at": "2026-01-01T00:00:00+00:00",
              "ended_at": "2026-01-01T01:00:00+00:00", "torch_version": "2.15.0+cu132",
              "torchvision_version": "0.29.2+cu132", "timm_version": "1.0.31", "numpy_version": "2.4.6",
              "cuda_version": "13.2", "cudnn_version": "92600", "weights_sha256": "", "tail_precision": "fp32",
              "threads": "1"}


def metric_rows(n_steps: int, rng: np.random.Generator) -> list[tuple[int, str, str, str, float]]:
    """(step, group, flavour, metric, value) as the runner writes them, with plausible values."""
    rows = []
    for t in range(n_steps):
        for k in range(t + 1):
            for flavour in (["task"] if k == t else []) + ["wo", "wo_refit", "w"]:
                rows.append((t, f"task_{k}", flavour, "acc", float(rng.uniform(40, 95))))
        for group in (["old"] if t else []) + ["new", "all"]:
            for flavour in ("wo", "wo_refit", "w"):
                for metric in ("acc", "acc_sample") + (("nmi", "ari") if flavour == "w" else ()):
                    rows.append((t, group, flavour, metric, float(rng.uniform(0, 1) if metric in ("nmi", "ari")
                                                                  else rng.uniform(40, 95))))
            for flavour in ("gcd", "gcd_sep"):
                rows.append((t, group, flavour, "acc", float(rng.uniform(40, 95))))
    last = n_steps - 1
    for flavour in ("wo", "wo_refit", "w"):
        for metric in ("A", "A_sample", "F", "F_max"):
            rows.append((last, "summary", flavour, metric, float(rng.uniform(0, 20) if metric.startswith("F")
                                                                 else rng.uniform(40, 95))))
    for flavour in ("gcd", "gcd_sep"):
        for metric in ("All", "Old", "New"):
            rows.append((last, "summary", flavour, metric, float(rng.uniform(40, 95))))
    return rows


def generate(results: Path, seeds: int) -> tuple[int, int, int]:
    """The `full` grid's runs over `seeds` seeds under `results`: (finished, failed, never run)."""
    specs = expand(load_grid("full"), seeds=list(range(seeds)))
    from bench.registries import METHODS, load_all

    load_all()

    rng, pick = np.random.default_rng(0), random.Random(0)
    counts = [0, 0, 0]
    for spec in specs:
        fate = pick.random()
        if fate < 0.01:
            counts[2] += 1
            continue
        out = results / "runs" / spec.run_id
        out.mkdir(parents=True, exist_ok=True)
        (out / "spec.json").write_text(spec.to_json())
        log = [f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00 step {i}: epoch loss {rng.uniform(0, 3):.4f}"
               for i in range(200)]
        if fate < 0.03:
            counts[1] += 1
            (out / "log.txt").write_text("\n".join(log[:50]) + "\n")
            (out / "error.txt").write_text("torch.OutOfMemoryError: CUDA out of memory\nTraceback (most recent "
                                           "call last):\n  ...\n")
            continue
        counts[0] += 1
        (out / "log.txt").write_text("\n".join(log) + "\n")
        reported = {m: "/".join(v) if isinstance(v, tuple) else str(v)
                    for m, v in dict(getattr(METHODS.get(spec.method), "reported", {})).items()}
        frame = pd.DataFrame(metric_rows(spec.n_steps, rng), columns=["step", "group", "flavour", "metric", "value"])
        identity = dict(run_id=spec.run_id, method=spec.method, preset=spec.preset, label=spec.label,
                        dataset=spec.dataset, split=spec.split_label, n_steps=spec.n_steps, backbone=spec.backbone,
                        seed=spec.seed, reported_A=reported.get("A", "wo/A"), reported_F=reported.get("F", "wo/F"),
                        features="bank V=8", mapping_images="train")
        frame = frame.assign(**identity, **PROVENANCE, duration_s=3600.0)
        frame.to_parquet(out / "metrics.parquet", index=False)
        (out / "DONE").write_text("")
    return tuple(counts)  # type: ignore[return-value]


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/report-site"))
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    lines = []
    for seeds in args.seeds:
        results = args.dir / f"seeds{seeds}"
        shutil.rmtree(results, ignore_errors=True)
        start = time.monotonic()
        done, failed, never = generate(results, seeds)
        generated = time.monotonic() - start
        from bench.reporting import site as site_module
        from bench.reporting.load import load_runs

        load_runs(sorted((results / "runs").iterdir()))  # warm: the first read of the files is not the report's cost
        real_write_site, site_seconds = site_module.write_site, []

        def timed_write_site(*a, **k):
            start = time.monotonic()
            try:
                return real_write_site(*a, **k)  # noqa: B023 (this iteration's, replaced below)
            finally:
                site_seconds.append(time.monotonic() - start)  # noqa: B023 (read in this iteration)

        site_module.write_site = timed_write_site
        timings = {}
        for formats in (("latex",), ("html",), ("latex", "html")):
            out = results / "reports" / "+".join(formats)
            start = time.monotonic()
            bench.report("full", seeds=list(range(seeds)), results=results, format=formats, out=out)
            timings["+".join(formats)] = time.monotonic() - start
        site_module.write_site = real_write_site
        out = results / "reports" / "html"
        pages = out / "runs"
        site = (out / "index.html").stat().st_size + size_of(pages) + sum((out / n).stat().st_size
                                                                         for n in ("site.css", "site.js"))
        row = dict(seeds=seeds, runs=done + failed + never, finished=done, failed=failed, never_run=never,
                   generate_s=round(generated, 1), **{f"report_{k}_s": round(v, 1) for k, v in timings.items()},
                   write_site_s=round(min(site_seconds), 1),
                   index_kb=round((out / "index.html").stat().st_size / 1024), run_pages=len(list(pages.glob("*.html"))),
                   site_mb=round(site / 2**20, 2), report_folder_mb=round(size_of(out) / 2**20, 2))
        if not args.no_browser:
            from chromium import Browser

            with Browser(width=1280, height=900) as browser:
                page = browser.open("about:blank")
                load = page.navigate(out / "index.html")
                ready = page.evaluate("document.body.dataset.ready")
                rows = page.evaluate("document.querySelectorAll('table.leaderboard tbody tr').length")
                sort_ms = page.evaluate(
                    "(() => { const t = Array.from(document.querySelectorAll('table.leaderboard'))"
                    ".sort((a, b) => b.tBodies[0].rows.length - a.tBodies[0].rows.length)[0];"
                    "const s = performance.now(); t.tHead.rows[0].cells[2].click(); return performance.now() - s; })()")
                assert ready == "1" and not page.console_errors()
                elsewhere = [u for u in page.requests if not u.startswith(("file://", "about:", "data:"))]
                assert not elsewhere, elsewhere
            row.update(browser_load_s=round(load, 2), leaderboard_rows=rows, sort_ms=round(sort_ms, 1))
        lines.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(pd.DataFrame(lines).to_string(index=False))


if __name__ == "__main__":
    main()
