"""Progress of a long wait in a run's log (bench/core/progress.py): a line at most every `every_s` seconds, with
the count, the rate and the time left, and nothing for a wait shorter than that."""
from __future__ import annotations

from bench.core.progress import LoggedProgress


def test_a_line_at_most_every_interval_with_rate_and_time_left():
    now, lines = [0.0], []
    progress = LoggedProgress("feature bank", 1000, lines.append, unit="image passes", every_s=30,
                              clock=lambda: now[0])
    now[0] = 10.0
    progress.advance(100)
    assert lines == []  # a short wait says nothing
    now[0] = 40.0
    progress.scaled(3).advance(100)  # 100 images read 1 + 2 times each
    assert lines == ["feature bank: 400 of 1,000 image passes (40%), 10 image passes/s, about 1 min 00 s left"]
    now[0] = 50.0
    progress.advance(100)
    assert len(lines) == 1  # ten seconds after the last line: none
    now[0] = 3700.0
    progress.advance(1)
    assert lines[-1] == "feature bank: 501 of 1,000 image passes (50%), 0.14 image passes/s, about 1 h 01 min left"
