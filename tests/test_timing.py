"""Tests of rope_lib.timing: time_rope_routes reports every route and checks its budget (no
test asserts a time; speed claims live in ``make bench``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rope_lib import (
    time_rope_routes,
)

#: The routes time_rope_routes measures, in the order of chapter 5's table.
TIMED_ROUTES = [
    "explicit matrix",
    "LLaMA complex",
    "rotate_half",
    "apply_rope interleaved",
    "apply_rope half",
    "copy",
]


def test_time_rope_routes_reports_every_route():
    """No assert on speed: only that every route ran and got a positive, finite time."""
    threads = torch.get_num_threads()
    times = time_rope_routes(batch=1, heads=2, N=16, d=8, repeats=3)
    assert list(times) == TIMED_ROUTES
    assert all(np.isfinite(t) and t > 0 for t in times.values())
    assert torch.get_num_threads() == threads


def test_time_rope_routes_accepts_any_seed():
    """Fuzz item 25: seed = 2**64 + 5 overflowed torch's generator; the seed is reduced
    modulo 2**63, as documented."""
    times = time_rope_routes(N=8, d=8, repeats=1, seed=2**64 + 5)
    assert list(times) == TIMED_ROUTES
    assert all(t > 0 for t in times.values())


def test_time_limits_are_checked_before_running():
    with pytest.raises(ValueError, match="repeats"):
        time_rope_routes(repeats=10**6)
    with pytest.raises(ValueError, match="repeats"):
        time_rope_routes(N=2048, d=128, repeats=500)  # past the 2**32 work budget
    with pytest.raises(ValueError, match="heads"):
        time_rope_routes(heads=10**12)
    with pytest.raises(ValueError, match="seed"):
        time_rope_routes(seed=-1)
