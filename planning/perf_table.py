"""Latency lookup over profiled points of one stage shape, by bilinear interpolation.

A `PerfTable` holds the profile grid of one (model, GPU type, TP, layers, phase, dtype,
backend): latency in ms at (batch size, sequence length). Queries between grid points are
interpolated; queries outside the profiled box raise `OutOfProfileRange` — never a silent
extrapolation. Templates, the simulator and FluidPD's budget all read latencies this way.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from planning.domain import Dtype, Phase, ProfilePoint


class OutOfProfileRange(ValueError):
    """The query lies outside the profiled (batch, sequence length) box."""


@dataclass(frozen=True, slots=True)
class StageKey:
    model: str
    gpu_type: str
    tp: int
    num_layers: int
    phase: Phase
    dtype: Dtype


@dataclass(frozen=True, slots=True)
class PerfTable:
    """Latency grid of one stage shape. `latency_ms[i][j]` is at (batches[i], seq_lens[j])."""

    key: StageKey
    batches: tuple[int, ...]
    seq_lens: tuple[int, ...]
    latency_ms: tuple[tuple[float, ...], ...]
    backend: str
    backend_version: str
    weights_gib: float | None = None
    kv_gib_per_token: float | None = None
    max_kv_tokens: int | None = None

    def covers(self, batch: float, seq_len: float) -> bool:
        return (
            self.batches[0] <= batch <= self.batches[-1]
            and self.seq_lens[0] <= seq_len <= self.seq_lens[-1]
        )

    def latency_s(self, batch: float, seq_len: float) -> float:
        """Interpolated latency in seconds at (batch, seq_len); raises outside the grid."""
        if not self.covers(batch, seq_len):
            raise OutOfProfileRange(
                f"{self.key.model} on {self.key.tp}x{self.key.gpu_type} ({self.key.phase}): "
                f"batch {batch} x seq {seq_len} outside profiled "
                f"batch {self.batches[0]}..{self.batches[-1]}, seq {self.seq_lens[0]}..{self.seq_lens[-1]}"
            )
        i0, i1, wb = _bracket(self.batches, batch)
        j0, j1, ws = _bracket(self.seq_lens, seq_len)
        grid = self.latency_ms
        low = grid[i0][j0] * (1 - ws) + grid[i0][j1] * ws
        high = grid[i1][j0] * (1 - ws) + grid[i1][j1] * ws
        return (low * (1 - wb) + high * wb) / 1000.0


def _bracket(axis: tuple[int, ...], value: float) -> tuple[int, int, float]:
    """Indices of the grid values around `value` and the weight of the upper one."""
    upper = bisect.bisect_left(axis, value)
    if upper < len(axis) and axis[upper] == value:
        return upper, upper, 0.0
    lower = upper - 1
    return lower, upper, (value - axis[lower]) / (axis[upper] - axis[lower])


def build_tables(points: Iterable[ProfilePoint]) -> dict[StageKey, PerfTable]:
    """Group profile points into complete grids, one per stage shape and backend.

    Where a stage shape has points from several backends, the one with more points wins
    (a fuller grid); ties prefer measured data: vllm over aic over analytic.
    A grid with holes raises ValueError naming the missing point.
    """
    groups: dict[tuple[StageKey, str, str], list[ProfilePoint]] = {}
    for p in points:
        key = StageKey(p.model, p.gpu_type, p.tp, p.num_layers, Phase(p.phase), Dtype(p.dtype))
        groups.setdefault((key, p.backend, p.backend_version), []).append(p)
    rank = {"vllm": 2, "aic": 1, "analytic": 0}
    best: dict[StageKey, tuple[tuple[int, int], PerfTable]] = {}
    for (key, backend, version), group in groups.items():
        table = _grid(key, backend, version, group)
        score = (len(group), rank.get(backend, -1))
        if key not in best or score > best[key][0]:
            best[key] = (score, table)
    return {key: table for key, (_, table) in best.items()}


def _grid(key: StageKey, backend: str, version: str, group: list[ProfilePoint]) -> PerfTable:
    batches = tuple(sorted({p.batch_size for p in group}))
    seq_lens = tuple(sorted({p.seq_len_tokens for p in group}))
    values = {(p.batch_size, p.seq_len_tokens): p.latency_ms for p in group}
    missing = [(b, s) for b in batches for s in seq_lens if (b, s) not in values]
    if missing:
        raise ValueError(
            f"profile grid of {key} ({backend}) has no point at batch x seq {missing[0]}"
        )
    first = group[0]
    return PerfTable(
        key=key,
        batches=batches,
        seq_lens=seq_lens,
        latency_ms=tuple(tuple(values[(b, s)] for s in seq_lens) for b in batches),
        backend=backend,
        backend_version=version,
        weights_gib=first.weights_gib,
        kv_gib_per_token=first.kv_gib_per_token,
        max_kv_tokens=first.max_kv_tokens,
    )
