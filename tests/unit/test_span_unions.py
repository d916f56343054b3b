"""The union of a group's intervals (self time, wall shares, the critical path)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from probe.analyzers.spantree import covered_ns


def test_overlaps_count_once_and_named_groups_read_as_numbered_ones():
    start = np.array([0, 5, 20, 0, 100, 3], dtype=np.int64)
    end = np.array([10, 12, 30, 4, 101, 3], dtype=np.int64)
    named = np.array(["model", "model", "model", "decode", "post", "decode"], dtype=object)
    by_name = covered_ns(named, start, end)
    assert by_name.to_dict() == {"decode": 4.0, "model": 22.0, "post": 1.0}
    assert list(by_name.index) == sorted(by_name.index)  # labelled in order, as groupby does
    codes, labels = pd.factorize(named)
    by_code = covered_ns(codes, start, end)
    assert {labels[i]: v for i, v in by_code.items()} == by_name.to_dict()
