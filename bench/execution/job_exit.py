"""How a SLURM job's process ends once its result is written: without the interpreter's teardown (`SlurmRun`,
`SlurmPack`)."""
from __future__ import annotations

import atexit
import os
import sys


def end_job_without_teardown() -> None:
    """In a submitit job process (its `__main__` is submitit's `_submit`; never in a caller running
    SlurmRun in-process, such as a test), end without the interpreter's teardown once submitit has
    written the result: `end_without_teardown` as the first exit handler."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", "") == "submitit.core._submit":
        atexit.register(end_without_teardown)


def end_without_teardown() -> None:
    """The job's last exit handler (the first to run): submitit has written the job's result by then, so
    the process ends without the interpreter's teardown, whose final collection of torch's objects
    took about 1.4 s of every job (gc.freeze(), which skipped it before, made triton's nanobind
    bindings print ~30 lines of "nanobind: leaked ..." into the job's log). Only a job that succeeded
    registers it, so exit status 0 is the one it would have had."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
