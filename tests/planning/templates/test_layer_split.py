import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.templates.layer_split import best_split


def _brute_force(latencies: list[np.ndarray], total: int) -> float | None:
    best = None
    for split in itertools.product(*(range(1, len(lat) + 1) for lat in latencies)):
        if sum(split) == total:
            value = max(float(lat[n - 1]) for lat, n in zip(latencies, split, strict=True))
            best = value if best is None else min(best, value)
    return best


@st.composite
def stages(draw: st.DrawFn) -> tuple[list[np.ndarray], int]:
    count = draw(st.integers(1, 3))
    latencies = []
    for _ in range(count):
        limit = draw(st.integers(1, 12))
        steps = draw(st.lists(st.integers(0, 9), min_size=limit, max_size=limit))
        latencies.append(np.cumsum(np.asarray(steps, dtype=float) + 0.5))
    return latencies, draw(st.integers(1, 30))


@settings(max_examples=200, deadline=None)
@given(stages())
def test_bottleneck_equals_brute_force(case: tuple[list[np.ndarray], int]) -> None:
    latencies, total = case
    split = best_split(latencies, total)
    expected = _brute_force(latencies, total)
    if expected is None:
        assert split is None
        return
    assert split is not None
    assert sum(split.layers) == total
    assert all(1 <= n <= len(lat) for n, lat in zip(split.layers, latencies, strict=True))
    assert split.bottleneck_s == expected


def test_balances_unequal_stages() -> None:
    fast = np.arange(1, 101) * 1.0  # 1 s per layer
    slow = np.arange(1, 101) * 3.0  # 3 s per layer
    split = best_split([fast, slow], 100)
    assert split is not None
    assert split.layers == (75, 25)
    assert split.bottleneck_s == 75.0


def test_memory_limit_forces_layers_elsewhere() -> None:
    fast = np.arange(1, 11) * 1.0  # holds at most 10 layers
    slow = np.arange(1, 101) * 3.0
    split = best_split([fast, slow], 40)
    assert split is not None and split.layers == (10, 30)


def test_no_split_when_memory_is_short() -> None:
    assert best_split([np.ones(3), np.ones(4)], 8) is None
