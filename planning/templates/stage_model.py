"""One stage shape (GPU type, TP) of one model and phase, as a function of the layers it holds.

Profiles give latency grids at a few layer counts per stage shape (e.g. L, ceil(L/2),
ceil(L/4), ceil(L/8)). Between two profiled counts, latency and memory are interpolated
linearly in the number of layers: each transformer layer costs the same, so the profiled
points lie on (or close to) a line `a + b x layers`, where `a` is the per-step work every stage
repeats (embedding, lm_head, scheduling).

Outside the profiled range we never extrapolate:
- above the largest profiled count a stage cannot be given more layers;
- below the smallest profiled count `n_min`, latency and memory are clamped to their value at
  `n_min` (`numpy.interp` holds the end value). That is an upper bound whenever latency and
  memory grow with layers, so a stage holding few layers is never rated faster or smaller than
  measured. Proportional scaling (latency x n / n_min) would drop the fixed part `a` of the
  step and rate small stages optimistically, so we do not use it.

Memory (per GPU, as the profiles state it): `weights_gib(n)` and `kv_gib_per_token(n)`
interpolate linearly. The usable budget `weights + KV cache` comes from the profiled rows that
fit: `usable_gib = weights_gib + max_kv_tokens x kv_gib_per_token` (the profiler's 0.9
utilisation minus its activation reserve), the smallest over the profiled counts. The stage's
KV capacity in tokens at `n` layers is `floor((usable - weights(n)) / kv_per_token(n))`; under
TP each GPU holds its share of every token, so a GPU's token capacity is the stage's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planning.domain import Phase
from planning.perf_table import PerfTable


class MissingMemoryData(ValueError):
    """A profile table lacks weights / KV sizes, so its memory cannot be checked."""


@dataclass(frozen=True, slots=True)
class StageShape:
    """`tp` GPUs of `gpu_type` in one machine."""

    gpu_type: str
    tp: int


@dataclass(frozen=True, slots=True)
class StageModel:
    """Latency and memory of one stage shape for one model and phase, by layers held."""

    shape: StageShape
    phase: Phase
    tables: tuple[PerfTable, ...]  # sorted by layers, one per profiled layer count
    usable_gib: float  # per GPU: weights + KV cache budget
    capacity_tokens: tuple[int, ...]  # index n-1: KV capacity with n layers, n = 1..max_layers

    @property
    def layer_counts(self) -> tuple[int, ...]:
        return tuple(t.key.num_layers for t in self.tables)

    @property
    def max_layers(self) -> int:
        return self.tables[-1].key.num_layers

    @property
    def min_batch(self) -> int:
        return max(t.batches[0] for t in self.tables)

    @property
    def max_batch(self) -> int:
        return min(t.batches[-1] for t in self.tables)

    @property
    def backends(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({(t.backend, t.backend_version) for t in self.tables}))

    def max_layers_for(self, kv_tokens: float) -> int:
        """Most layers this stage can hold with `kv_tokens` tokens of KV cache (0: none)."""
        # capacity falls as layers grow (more weights, more KV bytes per token)
        return int(np.count_nonzero(np.asarray(self.capacity_tokens) >= kv_tokens))

    def covers(self, batch: float, seq_len: float) -> bool:
        return all(t.covers(batch, seq_len) for t in self.tables)

    def latency_by_layers(self, batch: float, seq_len: float) -> NDArray[np.float64]:
        """Latency in s with n = 1..max_layers layers (index n-1), non-decreasing in n.

        Raises OutOfProfileRange outside the profiled (batch, seq) box.
        """
        profiled = [t.latency_s(batch, seq_len) for t in self.tables]
        layers = np.arange(1, self.max_layers + 1, dtype=float)
        values = np.interp(layers, self.layer_counts, profiled)
        # more layers never run faster; a noisy grid must not make the split exploit it
        return np.maximum.accumulate(values)


def stage_model(tables: Sequence[PerfTable]) -> StageModel | None:
    """The stage model of one shape from its tables (several layer counts); None if it never
    fits in memory. Raises MissingMemoryData if a table lacks memory fields."""
    ordered = tuple(sorted(tables, key=lambda t: t.key.num_layers))
    first = ordered[0].key
    for t in ordered:
        if t.weights_gib is None or t.kv_gib_per_token is None or t.max_kv_tokens is None:
            raise MissingMemoryData(
                f"profiles of {first.model} on {first.tp}x{first.gpu_type} ({first.phase}, "
                f"{t.key.num_layers} layers) have no weights_gib / kv_gib_per_token / max_kv_tokens"
            )
    fitting = [t for t in ordered if (t.max_kv_tokens or 0) > 0]
    if not fitting:
        return None
    usable = min(
        float(t.weights_gib or 0.0) + float(t.max_kv_tokens or 0) * float(t.kv_gib_per_token or 0)
        for t in fitting
    )
    counts = [t.key.num_layers for t in ordered]
    layers = np.arange(1, counts[-1] + 1, dtype=float)
    weights = np.interp(layers, counts, [float(t.weights_gib or 0.0) for t in ordered])
    kv = np.interp(layers, counts, [float(t.kv_gib_per_token or 0.0) for t in ordered])
    capacity = np.floor(np.maximum(usable - weights, 0.0) / np.maximum(kv, 1e-30))
    capacity = np.minimum.accumulate(capacity)  # monotone, as the memory model implies
    return StageModel(
        shape=StageShape(first.gpu_type, first.tp),
        phase=first.phase,
        tables=ordered,
        usable_gib=usable,
        capacity_tokens=tuple(int(min(c, 2**62)) for c in capacity),
    )
