"""`bench report --format html`: the static site. Its files and states without a browser; then, in
headless Chromium (Debian's `chromium`, which .ci/run installs), the leaderboard's rows, sorting,
filtering, a run page's link and that the page asks for nothing but its own files. The browser test
saves a screenshot to $BENCH_ARTIFACTS (CI keeps it) or to pytest's temporary directory."""
from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import bench
from bench.cli import main
from chromium import Browser, chromium_path
from helpers import TINY, tiny_specs

GRID = dict(grid="smoke", datasets=["synthetic"], splits=["2-step"], backbones=["pixels"], cfg_options=TINY)
METHODS = ["Baseline", "Baseline++", "K-means"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Two seeds of three methods on the tiny smoke recipe, K-means' seed 1 failing; Baseline's seed 2
    interrupted after its first step; the other seeds 2 never run."""
    from bench.registries import METHODS as REGISTRY, load_all

    results = tmp_path_factory.mktemp("site") / "results"
    assert bench.run(**GRID, methods=METHODS, seeds=[0], results=results, cluster="debug").ok
    assert bench.run(**GRID, methods=METHODS[:2], seeds=[1], results=results, cluster="debug").ok
    load_all()
    cls = REGISTRY.get("K-means")

    def learn(self, step):
        raise RuntimeError("planted failure <b>not bold</b>")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cls, "learn", learn)
        outcome = bench.run(**GRID, methods=["K-means"], seeds=[1], results=results, cluster="debug")
    assert [s.seed for s, _ in outcome.failed] == [1]
    baseline = REGISTRY.get("Baseline")
    real = baseline.learn

    def interrupted(self, step):
        if step.index == 1:
            raise KeyboardInterrupt("stopped as Ctrl-C stops a run")
        return real(self, step)

    with pytest.MonkeyPatch.context() as mp, pytest.raises(KeyboardInterrupt):
        mp.setattr(baseline, "learn", interrupted)
        bench.run(**GRID, methods=["Baseline"], seeds=[2], results=results, cluster="debug")
    return results


@pytest.fixture(scope="module")
def site(results):
    return bench.report(**GRID, methods=METHODS, seeds=[0, 1, 2], results=results, format="html")


def test_the_site_has_a_page_per_run_and_shows_failed_and_missing_runs(site):
    index = (site.out / "index.html").read_text()
    assert {p.name for p in site.paths} == {"index.html", "site.css", "site.js", "radar.png", "radar.pdf",
                                            "curve_synthetic_2-step.png", "curve_synthetic_2-step.pdf",
                                            "steps_synthetic.png", "steps_synthetic.pdf",
                                            "matrix_synthetic_2-step.png", "matrix_synthetic_2-step.pdf"}
    assert 'src="matrix_synthetic_2-step.png"' in index and "backward transfer" in index  # the site shows it
    pages = sorted((site.out / "runs").glob("*.html"))
    assert len(pages) == 9  # 3 methods × 3 seeds, whatever their state
    states = dict(re.findall(r'<a href="runs/([0-9a-f]{16})\.html">[0-9a-f]{16}</a>.*?data-v="([a-z ]+)"', index))
    assert sorted(states.values()) == ["done"] * 5 + ["failed"] + ["not run"] * 2 + ["unfinished"]
    failed = next(run for run, state in states.items() if state == "failed")
    page = (site.out / "runs" / f"{failed}.html").read_text()
    assert "planted failure &lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold" not in page
    assert "Traceback" in page  # error.txt in full, and the log's last lines
    # K-means has one finished seed of three: its row says so, and its runs are links coloured by state
    row = next(r for r in re.findall(r"<tr data-dataset.*?</tr>", index) if 'data-method="K-means"' in r)
    assert ">1/3<" in row and row.count("st-failed") == 1 and row.count("st-not-run") == 1
    row = next(r for r in re.findall(r"<tr data-dataset.*?</tr>", index) if 'data-method="Baseline"' in r)
    assert ">2/3<" in row and row.count("st-unfinished") == 1
    # a finished run's page opens with its figures, before its tables: its curve and its accuracy matrix, the
    # matrix's cells its own task rows (flavour wo, Baseline's A)
    done = next(run for run, state in states.items() if state == "done" and '"Baseline"' in
                (site.out.parent.parent / "runs" / run / "spec.json").read_text())
    page = (site.out / "runs" / f"{done}.html").read_text()
    assert page.index('<section id="figures">') < page.index('<section id="config">') and "<svg" in page
    metrics = pd.read_parquet(site.out.parent.parent / "runs" / done / "metrics.parquet")
    cell = metrics[(metrics.group == "task_0") & (metrics.flavour == "wo") & (metrics.step == 1)].value.item()
    assert re.search(r'<table class="matrix">.*after step 2</th><td class="num"[^>]*>' + f"{cell:.1f}<", page)
    # and its training curves: each loop's loss per epoch, as its predictions keep them
    import numpy as np

    from bench.runs.predictions import PREDICTIONS, Keys, each, opened

    with opened(site.out.parent.parent / "runs" / done / PREDICTIONS) as stored:
        loops = each(stored, Keys.epoch_loss)
        assert loops and all(len(v) >= 1 and np.isfinite(v).all() for v in loops.values())
    assert "step 1: training loss per epoch" in page and "step 2: training loss per epoch" in page
    assert re.search(r'<ul class="legend"><li><span class="swatch[^>]*></span>loop 1 \(\d+ epochs\)</li>', page)
    # and the confusion of old and new classes after its last step, with each class's accuracy
    from bench.reporting.per_class import of_run

    got = of_run(site.out.parent.parent / "runs" / done)
    assert "Old and new classes after the last step" in page
    assert f'<td class="num">{got.confusion.loc["old", "old"]:.1f}</td>' in page
    folded = page[page.index("<details><summary>accuracy of each class"):]
    folded = folded[:folded.index("</details>")]
    assert folded.count("<td>old</td>") + folded.count("<td>new</td>") == len(got.classes) == 6
    # no CDN, no absolute URL: every link and source is a file beside the page
    for path in [site.out / "index.html", *pages]:
        assert not re.search(r'(src|href)="(https?:)?//', path.read_text()), path


def test_every_leaderboard_cell_reaches_its_runs(site):
    index = (site.out / "index.html").read_text()
    for value in re.findall(r'<td class="num" data-v="[^"]*" title="mean[^"]*">(.*?)</td>', index):
        assert value.startswith('<a href="runs/'), value
    page = next(p for p in (site.out / "runs").glob("*.html") if ">Baseline · synthetic" in p.read_text())
    text = page.read_text()
    # config, provenance, every flavour's per-step table, the log, the files (relative links that exist)
    for heading in ("Configuration", "Provenance", "W/O (task-agnostic, frozen maps)", "W/O, maps re-fitted",
                    "W (one Hungarian match per group)", "task (each task&#x27;s own head)", "Log (last", "Files"):
        assert heading in text, heading
    assert "method.epochs" in text and "torch_version" in text
    links = re.findall(r'<li><a href="([^"]+)">(metrics.parquet|log.txt|spec.json)</a>', text)
    assert len(links) == 3 and all((page.parent / href).resolve().exists() for href, _ in links)
    assert "Runs of this cell (the other seeds)" in text  # seed 1 of Baseline is a link from seed 0's page


def test_user_text_is_escaped(tmp_path):
    """Labels, datasets, configuration values, logs and errors are user data: never markup."""
    from bench.reporting.site import write_site

    evil = '<img src=x onerror="alert(1)">'
    rows = []
    for seed in (0, 1):
        base = dict(run_id=f"r{seed}", method=evil, preset="code", label=evil, dataset='d"><script>x()</script>',
                    split="2-step", n_steps=2, backbone="pixels", seed=seed, reported_A="wo/A", reported_F="wo/F",
                    features=evil, host=evil)
        for step in (0, 1):
            rows += [{**base, "step": step, "group": "all", "flavour": "wo", "metric": "acc", "value": 50.0 + seed},
                     {**base, "step": step, "group": "task_0", "flavour": "task" if step == 0 else "wo",
                      "metric": "acc", "value": 60.0}]
        rows += [{**base, "step": 1, "group": "summary", "flavour": "wo", "metric": m, "value": v}
                 for m, v in (("A", 50.0 + seed), ("F", 3.0))]
        (tmp_path / "runs" / f"r{seed}").mkdir(parents=True)
        (tmp_path / "runs" / f"r{seed}" / "log.txt").write_text(f"line\n{evil}\n</pre><script>y()</script>\n")
    frame = pd.DataFrame(rows)
    spec = replace(tiny_specs()[0], config={"method": {"note": evil}})  # a configuration value, on r0's page
    runs = [(tmp_path / "runs" / "r0", spec), (tmp_path / "runs" / "r1", None)]
    paths = write_site(frame, tmp_path / "site", title=evil, runs=runs,
                       unplaced={}, label_of_spec=str, tables=[("t", "comparison", _scores(frame))])
    for path in [paths[0], *(tmp_path / "site" / "runs").glob("*.html")]:
        text = path.read_text()
        assert "<img" not in text and "<script>x()" not in text and "<script>y()" not in text, path
        assert text.count("<script") == 1  # site.js, nothing else
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in paths[0].read_text()
    page = (tmp_path / "site" / "runs" / "r0.html").read_text()
    assert "<th scope=\"row\">method.note</th><td>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</td>" in page


def _scores(frame):
    from bench.reporting.aggregate import final_scores

    return final_scores(frame)


def test_the_default_report_writes_the_site_beside_the_latex(results, capsys):
    out = results / "reports" / "default"
    assert main(["report", "--grid", "smoke", "--methods", *METHODS, "--datasets", "synthetic", "--splits", "2-step",
                 "--backbone", "pixels", "--results", str(results), "--out", str(out),
                 "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]) == 0
    assert (out / "table.tex").exists() and (out / "index.html").exists()
    assert "index.html  (the site: open it in a browser" in capsys.readouterr().out
    only = results / "reports" / "markdown"
    assert main(["report", "--grid", "smoke", "--methods", "k-means", "--datasets", "synthetic", "--splits", "2-step",
                 "--backbone", "pixels", "--results", str(results), "--out", str(only), "--format", "markdown",
                 "--cfg-options", *(f"{k}={v}" for k, v in TINY.items())]) == 0
    assert (only / "table.md").exists() and not (only / "index.html").exists()


@pytest.mark.skipif(chromium_path() is None, reason="no chromium on the PATH (Debian: apt-get install chromium; "
                                                    ".ci/run installs it): the site is not opened in a browser")
def test_the_site_works_in_headless_chromium(site, tmp_path):
    with Browser(width=1280, height=1000) as browser:
        page = browser.open(site.out / "index.html")
        assert page.evaluate("document.body.dataset.ready") == "1" and page.console_errors() == []
        rows = "Array.from(document.querySelectorAll('table.leaderboard tbody tr'))"
        labels = f"{rows}.filter(r => !r.hidden).map(r => r.cells[0].dataset.v)"
        assert sorted(page.evaluate(labels)) == sorted(METHODS)
        # sort by method (a header click), then the other way; then by A, best first
        header = "document.querySelectorAll('table.leaderboard thead th')[{}].click()"
        before = page.evaluate(labels)
        page.evaluate(header.format(0))
        ascending = page.evaluate(labels)
        page.evaluate(header.format(0))
        descending = page.evaluate(labels)
        assert ascending == sorted(METHODS) and descending == sorted(METHODS, reverse=True)
        assert before != ascending or before != descending  # the clicks moved rows
        a_column = page.evaluate("Array.from(document.querySelectorAll('table.leaderboard thead th'))"
                                 ".findIndex(th => th.textContent.startsWith('A ↑'))")
        page.evaluate(header.format(a_column))
        page.evaluate(header.format(a_column))
        a_values = page.evaluate(f"{rows}.map(r => r.cells[{a_column}].dataset.v)")
        finished = [float(v) for v in a_values if v]
        assert finished == sorted(finished, reverse=True) and len(finished) == 3
        # filtering by method hides the other rows
        page.evaluate("const s = document.querySelector('select[data-filter=method]'); s.value = 'K-means';"
                      "s.dispatchEvent(new Event('change'))")
        assert page.evaluate(labels) == ["K-means"]
        assert page.evaluate("document.querySelector('.filter-count').textContent") == "1 of 3 leaderboard rows"
        page.evaluate("const t = document.querySelector('select[data-filter=method]'); t.value = '';"
                      "t.dispatchEvent(new Event('change'))")
        # a curve legend's click hides that method's lines in both panels (accuracy, forgetting)
        hidden = page.evaluate("(() => { const li = document.querySelector('figure.curves ul.legend li'); li.click();"
                               "return Array.from(li.closest('figure').querySelectorAll('svg g[data-label]'))"
                               ".filter(g => getComputedStyle(g).display === 'none')"
                               ".map(g => g.dataset.label === li.dataset.label); })()")
        assert hidden == [True, True]
        page.screenshot(_artifact(tmp_path, "site-index.png"))
        # a run page, reached by clicking a leaderboard cell's link
        page.evaluate("document.querySelector('table.leaderboard td.runs a.st-done').click()")
        browser.wait_for("Page.loadEventFired", page.session)
        assert re.search(r"/runs/[0-9a-f]{16}\.html$", page.evaluate("location.href"))
        assert "Per-step metrics, every flavour" in page.evaluate("document.body.textContent")
        assert page.evaluate("document.querySelectorAll('table.metrics tbody tr').length") > 10
        page.screenshot(_artifact(tmp_path, "site-run.png"))
        requested = page.requests
    # no network request: the pages' own files (data: URLs are the browser's own images)
    assert requested and all(url.startswith(("file://", "data:")) for url in requested), requested
    print(f"screenshots: {_artifact(tmp_path, '')}")


def _artifact(tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("BENCH_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def test_a_run_page_says_what_a_loss_value_is_names_each_loop_and_numbers_the_mixed_settings_stages(tmp_path):
    """VB-CGCD's losses are one per SVI step, not per epoch; a mixed run's steps are its peers' stages 0 (labelled),
    1, ... as its log says them; class-iNCD's steps 1, 2, ...; every panel has its legend."""
    import numpy as np

    from bench.reporting.site.pages import _training_curves
    from bench.runs.predictions import LOSS_UNITS, PREDICTIONS, Keys

    loss = np.asarray([3.0, 2.0, 1.5], dtype=np.float32)
    svi = np.int8(LOSS_UNITS.index("SVI step"))
    mixed = {Keys.mixed: np.int8(1), Keys.epoch_loss(0, 0): loss, Keys.loss_unit(0, 0): svi,
             Keys.epoch_loss(1, 0): loss[:2], Keys.loss_unit(1, 0): svi, Keys.epoch_loss(1, 1): loss,
             Keys.loss_unit(1, 1): svi}
    np.savez(tmp_path / PREDICTIONS, **mixed)
    page = _training_curves(tmp_path)
    assert "stage 0: training loss per SVI step" in page and "stage 1: training loss per SVI step" in page
    assert "training loss per epoch" not in page and "<title>step " not in page
    assert page.count('<ul class="legend">') == 2 and "loop 1 (3 SVI steps)" in page and "loop 2 (3 SVI steps)" in page
    np.savez(tmp_path / PREDICTIONS, **{Keys.epoch_loss(0, 0): loss})  # class-iNCD, written before units were kept
    page = _training_curves(tmp_path)
    assert "step 1: training loss per epoch" in page and "loop 1 (3 epochs)" in page


def test_a_mixed_curve_counts_its_stages_from_0_and_class_incds_steps_from_1():
    import pandas as pd

    from bench.reporting.site.charts import svg_curves

    rows = pd.DataFrame([dict(label="A", step=s, mean=50.0 + s, std=0.0, n=1) for s in range(3)])
    mixed = svg_curves(rows, "t", "accuracy (%)", lambda _: "#000", xlabel="stage (0: labelled)", first=0)
    assert "<title>A, stage 0: 50.0" in mixed and "<title>A, stage 2: 52.0" in mixed and ">stage (0: labelled)<" in mixed
    incd = svg_curves(rows, "t", "accuracy (%)", lambda _: "#000")
    assert "<title>A, step 1: 50.0" in incd and "<title>A, step 3: 52.0" in incd and "stage" not in incd
