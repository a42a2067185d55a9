"""Latency lookup over profiled points of one stage shape, by bilinear interpolation.

A `PerfTable` holds the profile grid of one (model, GPU type, TP, layers, phase, dtype,
backend): latency in ms at (batch size, sequence length). Queries between grid points are
interpolated; queries outside the profiled box raise `OutOfProfileRange` — never a silent
extrapolation. Templates, the simulator and FluidPD's budget all read latencies this way.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

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


def table_at_layers(tables: Sequence[PerfTable], num_layers: int) -> PerfTable:
    """The grid of one stage shape at `num_layers`, interpolated linearly in layers.

    `tables` are the same stage shape (model, GPU, TP, phase, dtype) at several profiled layer
    counts. Each layer costs the same work, so latency and memory are linear in layers between
    two profiled counts. Below the smallest count the smallest table is used as is: an upper
    bound (the per-step fixed work would be lost by scaling down), never an optimistic guess.
    Above the largest count there is nothing to interpolate from: OutOfProfileRange.
    KV capacity follows from the usable memory (weights + KV budget) of the bracketing tables.
    """
    ordered = sorted(tables, key=lambda t: t.key.num_layers)
    exact = [t for t in ordered if t.key.num_layers == num_layers]
    if exact:
        return exact[0]
    if not ordered or num_layers > ordered[-1].key.num_layers:
        top = ordered[-1].key.num_layers if ordered else 0
        raise OutOfProfileRange(f"{num_layers} layers: profiled only up to {top} layers")
    if num_layers < ordered[0].key.num_layers:
        return replace(ordered[0], key=replace(ordered[0].key, num_layers=num_layers))
    upper = next(i for i, t in enumerate(ordered) if t.key.num_layers > num_layers)
    low, high = ordered[upper - 1], ordered[upper]
    if (low.batches, low.seq_lens) != (high.batches, high.seq_lens):
        raise ValueError(f"{low.key} and {high.key} were profiled on different grids")
    w = (num_layers - low.key.num_layers) / (high.key.num_layers - low.key.num_layers)
    grid = tuple(
        tuple(a * (1 - w) + b * w for a, b in zip(row_lo, row_hi, strict=True))
        for row_lo, row_hi in zip(low.latency_ms, high.latency_ms, strict=True)
    )
    memory = _memory_between(low, high, w)
    return replace(
        low,
        key=replace(low.key, num_layers=num_layers),
        latency_ms=grid,
        weights_gib=memory.weights_gib,
        kv_gib_per_token=memory.kv_gib_per_token,
        max_kv_tokens=memory.max_kv_tokens,
    )


def _memory_between(low: PerfTable, high: PerfTable, w: float) -> _Memory:
    """weights and KV bytes per token interpolated; capacity from the smaller usable budget."""
    w_lo, w_hi = low.weights_gib, high.weights_gib
    kv_lo, kv_hi = low.kv_gib_per_token, high.kv_gib_per_token
    cap_lo, cap_hi = low.max_kv_tokens, high.max_kv_tokens
    if w_lo is None or w_hi is None or kv_lo is None or kv_hi is None:
        return _Memory(None, None, None)
    if cap_lo is None or cap_hi is None:
        return _Memory(None, None, None)
    weights = w_lo * (1 - w) + w_hi * w
    kv = kv_lo * (1 - w) + kv_hi * w
    usable = min(w_lo + cap_lo * kv_lo, w_hi + cap_hi * kv_hi)
    capacity = int(max(usable - weights, 0.0) / kv) if kv > 0 else 0
    return _Memory(weights, kv, capacity)


@dataclass(frozen=True, slots=True)
class _Memory:
    weights_gib: float | None
    kv_gib_per_token: float | None
    max_kv_tokens: int | None
