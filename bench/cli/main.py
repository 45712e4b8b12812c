"""The `bench` command's entry point: the parser made of each command's module, the dispatch, and
how a command ends (one line for a user's error, a reader that leaves a pipe, Ctrl-C).

Every user error (unknown names, bad options, missing data, unwritable directories) is a
`BenchError` and is printed as one line on stderr with exit status 2; no traceback.
"""
from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from typing import Any, Callable, Sequence

from bench.cli import cache, cancel, check, data, listing, metrics, new, publish, report, run, status, store, tune, weights, worker
from bench.errors import BenchError, disk_full
from bench.reporting.outcomes import DISK_FULL
from bench.core.storage import shortened

# in the order `bench --help` lists them; each module adds its parser and runs its command
COMMANDS = {"run": run, "worker": worker, "status": status, "cancel": cancel, "list": listing, "data": data,
            "weights": weights, "cache": cache, "metrics": metrics, "report": report, "tune": tune, "publish": publish,
            "store": store, "new": new, "check": check}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="class-iNCD benchmark harness")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for module in COMMANDS.values():
        module.add_parser(sub)
    for command in sub.choices.values():  # every command sees the same plugins (bench.registries.plugins)
        command.add_argument("--include", action="append", default=[], metavar="DIR",
                             help="a folder of plugins (methods, datasets, backbones; presets/, grids/), "
                                  "repeatable; added to $BENCH_INCLUDE")
    return parser


class _ReaderMayLeave:
    """stdout for `bench ... | head`: once the reader has gone, what is written is discarded instead of
    raising BrokenPipeError, so that no run fails over it and the exit status still says whether
    every run finished."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        # point the file descriptor at /dev/null: later writes and the interpreter's last flush succeed
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """`bench ARGS`: the command's exit status. From the command line (no `argv`), the process then
    ends without the interpreter's teardown (`_exit_now`); a caller that passes `argv` goes on."""
    stdout, stderr = sys.stdout, sys.stderr
    # both: `bench run 2>&1 | head` closes stderr too, and a warning or the list of failed runs written
    # there must not end the command nor turn its exit status into another
    sys.stdout, sys.stderr = _ReaderMayLeave(stdout), _ReaderMayLeave(stderr)
    try:
        code = _main(argv)
        if argv is None:
            _exit_now(code)  # flushes through _ReaderMayLeave: a reader that left costs nothing
        return code
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _exit_now(code: int) -> None:
    """Do what the interpreter's exit does first (join threads, as idle executors' are told to end;
    run the atexit handlers: worker pools, logging), flush, and end the process without the
    interpreter's teardown: its final garbage collection of what torch allocated takes 1.4 s of a
    light command's 1.5, and it is where nanobind (triton's bindings: torchvision.ops imports
    torch._dynamo, which imports triton) prints ~30 lines of "nanobind: leaked ..." when objects
    outlive it, as they did under the gc.freeze() that skipped that collection before."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # CPython's own first step of Py_FinalizeEx
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`bench ... | head`): nothing more to say
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:  # argparse would list them, not suggest
        from bench.errors import unknown

        print(f"bench: error: {unknown('command', argv[0], COMMANDS)}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv or ["run"])
    if args.command is None:
        args = parser.parse_args(["run", *argv])
    try:
        from bench.registries.plugins import activate

        activate(args.include)
        command: Callable[[argparse.Namespace], int] = COMMANDS[args.command].command
        return command(args)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # a path option, or a path built from one, beyond the file system's limits
            print(f"bench: error: a path is too long for the file system ({err.strerror}): "
                  f"{shortened(str(err.filename or err))}; give shorter paths", file=sys.stderr)
            return 2
        if not disk_full(err):
            raise
        print(f"bench: error: {DISK_FULL.format(err.filename or err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: every run checkpoints after each step
        from bench.execution.workers import INTERRUPTED, STOP_SIGNALS, exit_at_once

        for sig in STOP_SIGNALS if command_line and threading.current_thread() is threading.main_thread() else ():
            signal.signal(sig, exit_at_once)  # a second one ends bench now, whatever exiting still waits for
        if args.command in ("data", "weights") and getattr(args, "action", "") == "fetch":
            print("bench: interrupted; nothing half-fetched was put in place: the same command resumes the download",
                  file=sys.stderr)
        elif args.command == "report":
            from bench.reporting.files import INCOMPLETE

            print(f"bench: interrupted; the report folder is incomplete (its {INCOMPLETE} says so): run `bench "
                  f"report` again", file=sys.stderr)
        else:
            print(INTERRUPTED, file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)

