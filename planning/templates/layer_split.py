"""The integer layer split of a pipeline that minimises its bottleneck stage time.

Problem. Stages i = 1..k; `lat_i(n)` is stage i's time with n layers, non-decreasing in n
(`StageModel.latency_by_layers`), and `m_i` the most layers stage i can hold in memory at the
batch being evaluated. Choose integers n_i with 1 <= n_i <= m_i and sum n_i = L minimising the
bottleneck T = max_i lat_i(n_i). A pipeline's steady-state throughput is batch / T, so this is
the split that maximises throughput subject to every stage's memory.

Exact algorithm. For a threshold T, stage i can take at most c_i(T) = #{n <= m_i : lat_i(n) <= T}
layers (monotone lat makes these a prefix 1..c_i). A split with bottleneck <= T exists iff
every c_i(T) >= 1 and sum c_i(T) >= L; that predicate is monotone in T, and the optimum equals
one of the finitely many values lat_i(n). Bisection over those sorted values finds the least
feasible T in O(log(kL)) predicate checks of O(k log L) each. (A DP over stages and layers,
O(k L^2), gives the same optimum; bisection is cheaper and as exact.)

Among the splits with bottleneck T* we take the one with the smallest sum of stage times
(the pipeline's latency): start from n_i = c_i(T*) and remove the surplus layers one at a time
from the stage where a layer costs most. The removal is optimal when lat_i is convex in n
(piecewise-linear with non-decreasing slopes, as `a + b x layers` profiles are); otherwise it is
a tie-break that never changes T*, and therefore never changes throughput.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class LayerSplit:
    """Layers per stage (pipeline order) and the resulting stage times in s."""

    layers: tuple[int, ...]
    stage_s: tuple[float, ...]

    @property
    def bottleneck_s(self) -> float:
        return max(self.stage_s)

    @property
    def total_s(self) -> float:
        return sum(self.stage_s)


def _caps(latencies: Sequence[NDArray[np.float64]], threshold: float) -> list[int]:
    return [int(np.searchsorted(lat, threshold, side="right")) for lat in latencies]


def _feasible(caps: list[int], total_layers: int) -> bool:
    return min(caps) >= 1 and sum(caps) >= total_layers


def best_split(latencies: Sequence[NDArray[np.float64]], total_layers: int) -> LayerSplit | None:
    """Min-bottleneck integer split of `total_layers` layers; None if no split fits.

    `latencies[i][n-1]` is stage i's time with n layers, non-decreasing, truncated at the most
    layers stage i can hold (its memory limit).
    """
    if len(latencies) > total_layers or min(map(len, latencies)) < 1:
        return None  # every stage holds at least one layer
    if sum(len(lat) for lat in latencies) < total_layers:
        return None
    candidates = np.unique(np.concatenate(latencies))
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _feasible(_caps(latencies, float(candidates[mid])), total_layers):
            hi = mid
        else:
            lo = mid + 1
    caps = _caps(latencies, float(candidates[lo]))
    layers = _shed_surplus(latencies, caps, total_layers)
    return LayerSplit(
        layers=tuple(layers),
        stage_s=tuple(float(lat[n - 1]) for lat, n in zip(latencies, layers, strict=True)),
    )


def _shed_surplus(
    latencies: Sequence[NDArray[np.float64]], caps: list[int], total_layers: int
) -> list[int]:
    """Remove layers beyond `total_layers`, each from the stage where the last layer costs most."""
    layers = list(caps)
    for _ in range(sum(layers) - total_layers):
        best_i, best_saving = -1, -1.0
        for i, (lat, n) in enumerate(zip(latencies, layers, strict=True)):
            if n > 1:
                saving = float(lat[n - 1] - lat[n - 2])
                if saving > best_saving:
                    best_i, best_saving = i, saving
        layers[best_i] -= 1
    return layers
