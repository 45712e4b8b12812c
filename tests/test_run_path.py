"""The path of a run with augmented views (`tests/run_path.py`: CaSSLe on the tiny ViT and a tiny CIFAR-10)
goes through the view code without back and forth: the encoder, the view policies, the decoding, the
preprocessing and the autocast are each entered from at most 3 functions elsewhere. Before decoding and
the policies had a home each, `bench/features/views.py` alone was entered from 6."""
from __future__ import annotations

from tests.run_path import run_path

VIEW_FILES = ("bench/features/views.py", "bench/features/augment.py", "bench/data/decode.py",
              "bench/data/preprocess.py", "bench/features/precision.py")


def test_the_view_code_is_entered_from_at_most_three_places():
    entries = run_path("views")
    # the run did take the path measured: its token source cut views with the real datasets' policy
    # (Python 3.10 names functions without their class)
    into_augment = entries.places["bench/features/augment.py"]
    from_view = next(callees for place, callees in into_augment.items()
                     if place.startswith("bench/features/tokens.py:") and place.endswith("_view"))
    assert {"ViewPolicy.__call__", "__call__"} & from_view
    assert entries.calls["bench/features/augment.py"] > 2  # every batch's two views, not one call
    visits = entries.visits()
    assert {file: visits.get(file, 0) for file in VIEW_FILES if visits.get(file, 0) > 3} == {}
    assert all(visits.get(file, 0) >= 1 for file in VIEW_FILES if file != "bench/data/preprocess.py")
