"""Progress of a long wait written to a run's log: a bank build over a dataset takes minutes to hours on a GPU,
and a log that says nothing for that long looks like a hang. `LoggedProgress` writes a line at most every
`every_s` seconds (done, total, rate, time left), and nothing for a wait shorter than that."""
from __future__ import annotations

import time
from typing import Callable


class LoggedProgress:
    def __init__(self, what: str, total: int, log: Callable[[str], None], *, unit: str = "images",
                 every_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.total, self.log, self.unit, self.every_s, self.clock = what, total, log, unit, every_s, clock
        self.done, self.start = 0, clock()
        self.last = self.start

    def advance(self, n: int) -> None:
        """`n` more done; a line when `every_s` seconds passed since the last one."""
        self.done += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            self.log(self.line(now))

    def scaled(self, factor: int) -> "_Scaled":
        """The same count, `factor` units per item advanced (an image read 1 + V times counts 1 + V)."""
        return _Scaled(self, factor)

    def line(self, now: float) -> str:
        rate = self.done / max(now - self.start, 1e-9)
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        share = 100 * self.done / self.total if self.total else 100.0
        shown = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
        return (f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({share:.0f}%), {shown} {self.unit}/s, "
                f"about {_clock(left)} left")


class _Scaled:
    def __init__(self, progress: LoggedProgress, factor: int) -> None:
        self.progress, self.factor = progress, factor

    def advance(self, n: int) -> None:
        self.progress.advance(n * self.factor)


def _clock(seconds: float) -> str:
    if seconds == float("inf"):
        return "? s"
    seconds = int(round(seconds))
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min" if seconds >= 3600 else (
        f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s")
