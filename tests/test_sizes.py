"""The one byte formatter (bench/core/sizes.py), which downloads, `bench data fetch`, `bench weights fetch`
and the html site's file listings print sizes with: its text for sizes worked out by hand."""
from __future__ import annotations

import pytest

from bench.core.sizes import size_text


@pytest.mark.parametrize("n, text", [
    (0, "0 B"),
    (1023, "1023 B"),  # below 1 KiB: whole bytes
    (1024, "1.0 KiB"),
    (1536, "1.5 KiB"),
    (3 * 2**19, "1.5 MiB"),  # 1,572,864 B
    (11 * 2**29, "5.5 GiB"),  # 5,905,580,032 B
    (2**41, "2048.0 GiB"),  # 2 TiB: GiB is the largest unit
])
def test_sizes_by_hand(n, text):
    assert size_text(n) == text


def test_a_run_page_lists_its_files_sizes_in_it(tmp_path):
    from bench.reporting.site.pages import _files

    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.npz").write_bytes(b"x" * 1536)
    (run / "log.txt").write_bytes(b"x" * 1023)
    (run / "cache").mkdir()
    listing = _files(run, tmp_path)
    assert '<span class="size">1.5 KiB</span>' in listing and '<span class="size">1023 B</span>' in listing
    assert '<span class="size">folder</span>' in listing
