"""Trackers (`--tracker`, a grid's `trackers` key; bench.runs.trackers): a run of the demo grid sends TensorBoard,
W&B and MLflow, offline, the numbers of its own files, read back here from what each wrote (the event files, the
offline run's .wandb file, the MLflow file store); a missing extra or an unknown name is refused in one line before
anything runs; a tracker that fails mid-run is logged once and the run finishes with its results."""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import pandas as pd
import pytest

import bench
from bench.cli import main
from bench.errors import BenchError
from bench.runs.predictions import PREDICTIONS, Keys, each, opened
from bench.runs.trackers import TensorBoard
from tests.helpers import TINY

RUN = dict(grid="demo", methods=["baseline"], splits=["2-step"], seeds=[0], cluster="debug")
MODULES = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow"}


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """Every tracker offline and quiet, in the test's own folders, whatever the shell set; restored afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_DIR", "WANDB_PROJECT", "MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE"):
            mp.setenv(name, "")  # recorded, so that the context puts back what the shell had
            mp.delenv(name)
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_SILENT", "true")
        mp.setenv("WANDB_CONFIG_DIR", str(tmp_path_factory.mktemp("wandb-config")))
        yield mp


@pytest.fixture(scope="module")
def tracked(offline, tmp_path_factory):
    """One run of the demo grid (Baseline, 2-step, seed 0) sent to every installed tracker: its directory, metrics
    frame, stored per-epoch losses and results root."""
    trackers = [name for name, module in MODULES.items() if _installed(module)]
    if not trackers:
        pytest.skip("no tracker extra installed (pip install 'bench[trackers]')")
    results = tmp_path_factory.mktemp("tracked")
    outcome = bench.run(**RUN, results=results, trackers=trackers)
    assert outcome.ok
    if "wandb" in trackers:
        import wandb

        wandb.teardown()  # its service process ends with this test module, not with pytest
    out = results / "runs" / outcome.specs[0].run_id
    log = (out / "log.txt").read_text()
    assert f"trackers: {', '.join(trackers)} started" in log and "failed" not in log, log
    frame = pd.read_parquet(out / "metrics.parquet")
    with opened(out / PREDICTIONS) as stored:
        losses = each(stored, Keys.epoch_loss)  # by (step, loop)
    return dict(out=out, frame=frame, losses=losses, results=results, trackers=trackers, spec=outcome.specs[0])


def expected(run: dict) -> dict[tuple[str, int], float]:
    """What a tracker should hold, by (key, x): each stored epoch loss, each step's metric rows, the summary rows,
    A and F (at the summary's step)."""
    frame, out = run["frame"], {}
    for (t, i), values in run["losses"].items():
        out.update({(f"loss/step_{t}/loop_{i}", epoch): float(v) for epoch, v in enumerate(values)})
    for row in frame.itertuples():
        prefix = "summary" if row.group == "summary" else f"eval/{row.group}"
        out[(f"{prefix}/{row.flavour}/{row.metric}", int(row.step))] = row.value
    last = int(frame[frame["group"] == "summary"]["step"].max())
    for name in ("A", "F"):
        out[(name, last)] = out[(f"summary/{frame[f'reported_{name}'].iloc[0]}", last)]
    return out


def same_numbers(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    assert len(want) > 100 and any(k.startswith("loss/") for k, _ in want)  # the 2 x 200 epochs' losses among them
    bad = {k: (got[k], want[k]) for k in want if got[k] != pytest.approx(want[k], rel=1e-6, abs=1e-6)}
    assert bad == {}


def records(path: Path, header: int = 0):
    """The records of a TFRecord file (TensorBoard's events: length, its crc, data, its crc) or, with `header`
    bytes first, of W&B's log (blocks of 32 KiB, each record a 7-byte header: crc, length, kind, then its data;
    one record may span blocks: kinds first, middle, last)."""
    data = path.read_bytes()
    if not header:
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            yield data[pos + 12:pos + 12 + length]
            pos += 12 + length + 4
        return
    pos, block, pending = header, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            yield pending


def test_tensorboard_holds_the_runs_numbers(tracked):
    if "tensorboard" not in tracked["trackers"]:
        pytest.skip("tensorboardX not installed")
    from tensorboardX.proto.event_pb2 import Event

    spec = tracked["spec"]
    folder = tracked["results"] / "tensorboard" / "demo" / f"Baseline-{spec.run_id}"
    got, texts = {}, {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for raw in records(path):
            event = Event.FromString(raw)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    got[(value.tag, event.step)] = value.simple_value
                else:
                    texts[value.tag] = value.tensor.string_val[0].decode()
    same_numbers(got, expected(tracked))
    assert f"| run.run_id | {spec.run_id} |" in texts["config/text_summary"]
    assert "| config.method.epochs | 200 |" in texts["config/text_summary"]
    assert "| git_commit |" in texts["provenance/text_summary"]


def test_wandb_offline_run_holds_the_runs_numbers(tracked):
    if "wandb" not in tracked["trackers"]:
        pytest.skip("wandb not installed")
    from wandb.proto.wandb_internal_pb2 import Record

    spec = tracked["spec"]
    [path] = (tracked["results"] / "wandb" / "wandb").glob(f"offline-run-*-{spec.run_id}/run-{spec.run_id}.wandb")
    got, summary, config, runs = {}, {}, {}, []
    for raw in records(path, header=7):
        record = Record.FromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            runs.append(record.run)
            config.update({u.key: u.value_json for u in record.run.config.update})
        elif kind == "config":
            config.update({u.key: u.value_json for u in record.config.update})
        elif kind == "history":
            row = {(i.key or "/".join(i.nested_key)): float(i.value_json) for i in record.history.item}
            x = row.pop("epoch", None)
            x = row.pop("step") if x is None else x
            got.update({(k, int(x)): v for k, v in row.items() if not k.startswith("_")})
        elif kind == "summary":
            summary.update({(u.key or "/".join(u.nested_key)): u.value_json for u in record.summary.update})
    last = int(tracked["frame"]["step"].max())
    for key in summary:
        if key in ("A", "F") or key.startswith("summary/"):
            got[(key, last)] = float(summary[key])
    same_numbers(got, expected(tracked))
    [run] = runs
    assert (run.run_id, run.display_name, run.run_group, run.project) == (spec.run_id, f"Baseline-{spec.run_id}",
                                                                           "demo", "bench")
    assert f'"run_id":"{spec.run_id}"' in config["run"] and '"epochs":200' in config["config"]
    assert '"git_commit"' in config["provenance"]


def test_mlflow_file_store_holds_the_runs_numbers(tracked):
    if "mlflow" not in tracked["trackers"]:
        pytest.skip("mlflow not installed")
    from mlflow.tracking import MlflowClient

    spec = tracked["spec"]
    assert os.environ["MLFLOW_ALLOW_FILE_STORE"] == "true"  # set by the run: MLflow 3 refuses its file store without
    client = MlflowClient(tracking_uri=(tracked["results"] / "mlruns").as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("demo").experiment_id])
    assert (run.info.run_name, run.info.status, run.data.tags["bench.run_id"]) == (f"Baseline-{spec.run_id}",
                                                                                   "FINISHED", spec.run_id)
    got = {(key, m.step): m.value for key in run.data.metrics for m in client.get_metric_history(run.info.run_id, key)}
    same_numbers(got, expected(tracked))
    assert run.data.params["run.run_id"] == spec.run_id and run.data.params["config.method.epochs"] == "200"
    assert run.data.tags["provenance.git_commit"] == tracked["frame"]["git_commit"].iloc[0]


@pytest.mark.parametrize("name, extra", [("tensorboard", "tensorboard"), ("wandb", "wandb"), ("mlflow", "mlflow")])
def test_a_tracker_whose_extra_is_missing_is_refused_in_one_line(name, extra, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, MODULES[name], None)  # the import fails, as without the extra
    with pytest.raises(BenchError) as refused:
        bench.run(**RUN, results=tmp_path, trackers=[name], dry_run=True)
    assert str(refused.value) == (f"tracker {name!r} needs the {extra} extra, which is not installed in this "
                                  f"environment: pip install 'bench[{extra}]'")
    assert main(["run", "--grid", "demo", "--methods", "baseline", "--tracker", name, "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"bench: error: {refused.value}"]
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_an_unknown_tracker_is_refused_with_the_valid_ones(capsys, tmp_path):
    assert main(["run", "--tracker", "tensorbord", "--dry-run", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == ("bench: error: unknown tracker 'tensorbord'; known: mlflow, tensorboard, "
                                               "wandb; did you mean 'tensorboard'?")


def test_a_grids_trackers_key_adds_to_the_commands_and_keeps_the_run_ids(tmp_path):
    pytest.importorskip("tensorboardX")
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "tracked.py").write_text(
        'methods = ["Baseline"]\ndatasets = ["digits"]\nsplits = ["2-step"]\nseeds = [0]\nbackbone = "pixels"\n'
        'trackers = ["tensorboard"]\n')
    from bench.registries import plugins

    try:
        tracked = bench.run("tracked", include=[tmp_path], results=tmp_path / "r", dry_run=True)
    finally:  # the folder's grid must not outlive the test (other tests list every grid)
        plugins.reset()
    plain = bench.run("demo", methods=["Baseline"], splits=["2-step"], seeds=[0], results=tmp_path / "r", dry_run=True)
    assert [s.run_id for s in tracked.specs] == [s.run_id for s in plain.specs]  # where it is sent is no part of a run
    assert {k: tracked.specs[0].location[k] for k in ("trackers", "grid")} == {"trackers": ["tensorboard"],
                                                                               "grid": "tracked"}
    assert "trackers" not in plain.specs[0].location


def test_a_tracker_that_fails_mid_run_is_logged_once_and_the_run_finishes(tmp_path, monkeypatch):
    pytest.importorskip("tensorboardX")
    calls = []

    def broken(self, step, values):
        calls.append(step)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TensorBoard, "log_step_metrics", broken)
    monkeypatch.setattr(TensorBoard, "log_final", lambda *a: calls.append("final"))
    outcome = bench.run("smoke", methods=["baseline"], datasets=["synthetic"], splits=["2-step"], seeds=[0],
                        backbones=["pixels"], cfg_options=TINY, cluster="debug", results=tmp_path, trackers=["tensorboard"])
    out = tmp_path / "runs" / outcome.specs[0].run_id
    assert outcome.ok and (out / "DONE").exists() and len(pd.read_parquet(out / "metrics.parquet"))
    failed = [line for line in (out / "log.txt").read_text().splitlines() if "tracker" in line and "failed" in line]
    assert len(failed) == 1 and failed[0].endswith("tracker tensorboard failed in log_step_metrics: OSError: [Errno 28] "
                                                   "No space left on device; nothing more is sent to it in this run, "
                                                   "which goes on")
    assert calls == [0]  # dropped after its first failure: not called for step 1 nor the final numbers


def test_a_resumed_run_goes_on_in_the_same_tracker_runs(tmp_path, monkeypatch, offline):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient
    from tensorboardX.proto.event_pb2 import Event

    from bench.config.selection import Selection
    from bench.execution.selection import expand_selection
    from tests.helpers import killed_then_resumed

    _, [spec] = expand_selection(Selection("smoke", methods=["baseline"], datasets=["synthetic"], splits=["2-step"],
                                           seeds=[0], backbones=["pixels"], cfg_options=TINY),
                                 trackers=["tensorboard", "mlflow"])
    out = killed_then_resumed(spec, tmp_path, bench.METHODS.get("Baseline"), 1, monkeypatch)
    assert "trackers: tensorboard, mlflow started (resumed" in (out / "log.txt").read_text()
    folder = tmp_path / "tensorboard" / "smoke" / f"Baseline-{spec.run_id}"
    files = sorted(folder.glob("events.out.tfevents.*"))
    steps = {Event.FromString(raw).step for path in files for raw in records(path)
             if any(v.tag == "eval/all/w/acc" for v in Event.FromString(raw).summary.value)}
    assert len(files) == 2 and steps == {0, 1}  # step 0 from the first attempt, step 1 from the resumed one
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
    assert run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/all/w/acc")] == [0, 1]


def test_a_tracker_whose_library_is_missing_where_the_run_runs_is_logged_and_the_run_finishes(tmp_path, monkeypatch):
    """The check is made where `bench run` runs; a SLURM node or a worker without the extra finds out at start."""
    pytest.importorskip("tensorboardX")
    from bench.config.selection import Selection
    from bench.execution.selection import expand_selection
    from bench.protocol.runner import execute

    _, [spec] = expand_selection(Selection("smoke", methods=["k-means"], datasets=["synthetic"], splits=["2-step"],
                                           seeds=[0], backbones=["pixels"], cfg_options=TINY),
                                 trackers=["tensorboard"])
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    out = execute(spec, tmp_path)
    log = (out / "log.txt").read_text()
    assert (out / "DONE").exists() and "trackers: none started" in log
    assert "tracker tensorboard failed in start: ModuleNotFoundError: import of tensorboardX halted; None in sys.modules" in log
    assert not (tmp_path / "tensorboard").exists()


def _closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on: bound, then closed."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_mlflow_server_is_asked_once_and_the_runs_go_on_without_it(tmp_path, monkeypatch, capsys):
    """An MLflow server away costs one short look before the runs, said in one line, not minutes of retries in every
    run: nothing connects to it after that look, and the runs finish with their results."""
    pytest.importorskip("mlflow")
    import socket

    port = _closed_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # without the look, each run tries once (kept short)
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    attempts = []
    connect = socket.socket.connect

    def counted(self, address):
        if isinstance(address, tuple) and address[1] == port:
            attempts.append(address)
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", counted)
    outcome = bench.run("smoke", methods=["baseline"], datasets=["synthetic"], splits=["2-step"], seeds=[0, 1],
                        backbones=["pixels"], cfg_options=TINY, cluster="debug", results=tmp_path, trackers=["mlflow"])
    assert outcome.ok and len(outcome.done) == 2
    assert len(attempts) == 1  # the look before the runs; the two runs sent nothing there
    said = [line for line in capsys.readouterr().err.splitlines() if "MLflow" in line]
    assert said == [f"bench: warning: MLflow at http://127.0.0.1:{port} is unreachable (Connection refused); runs go on "
                    f"without it"]
    for spec in outcome.specs:
        assert "trackers" not in spec.location
        assert "tracker" not in (tmp_path / "runs" / spec.run_id / "log.txt").read_text()


def test_a_tracker_server_that_answers_is_kept_and_a_file_store_is_not_asked(monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from bench.runs.tracker_endpoints import answering, endpoint

    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (http.server's name)
            self.send_error(403)  # an answer all the same: the client judges what it means

        def log_message(self, *_):
            pass

    server = HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{server.server_address[1]}")
        said = []
        assert answering(["tensorboard", "mlflow"], said.append) == ["tensorboard", "mlflow"] and said == []
    finally:
        server.shutdown()
        server.server_close()
    for uri in ("", "file:///tmp/mlruns", "/tmp/mlruns", "databricks"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert endpoint("mlflow") is None
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert endpoint("wandb") is None
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    said = []
    assert answering(["wandb"], said.append) == [] and said[0].startswith("W&B at http://127.0.0.1:")


@pytest.mark.parametrize("mode", ["", "ofline"])
def test_a_wandb_mode_wandb_refuses_is_refused_in_one_line_naming_the_valid_ones(mode, monkeypatch, capsys, tmp_path):
    """W&B refuses WANDB_MODE set but empty (it does not read it as unset) with a bare validation error of its
    settings in every run: bench refuses it before anything runs, naming the values W&B takes."""
    wandb = pytest.importorskip("wandb")
    import typing

    monkeypatch.setenv("WANDB_MODE", mode)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    assert main(["run", "--grid", "smoke", "--methods", "baseline", "--datasets", "synthetic", "--splits", "2-step",
                 "--backbone", "pixels", "--cluster", "debug", "--tracker", "wandb", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"bench: error: WANDB_MODE is {mode!r}: W&B takes online, offline, shared, disabled, dryrun, run; unset it "
        f"for bench's default (offline)"]
    assert not (tmp_path / "runs").exists()
    from bench.runs.trackers import WANDB_MODES

    assert WANDB_MODES == typing.get_args(wandb.Settings.model_fields["mode"].annotation)  # the installed W&B's
