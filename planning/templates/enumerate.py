"""Candidate pipelines: stage shapes of a model and the multisets of them worth evaluating.

Stage shapes. A stage is (GPU type, TP) with TP in `params.tp_degrees` and TP <= the GPU's
`gpus_per_machine` (a stage never spans machines), for which the profiles hold latency grids
of the model's default dtype. Shapes vLLM cannot run (TP not dividing the heads) have no
profiles and so never appear.

Multisets, not sequences. Hand-off cost between stages is the same for every boundary (one
network bandwidth, `TemplateParams`), and the layer split is re-optimised for each candidate,
so every order of the same stages has the same rating: each multiset is evaluated once, in a
canonical order (GPU type, TP). If hand-off costs ever depend on the pair of machines, the
best of the at most 4! orders would be taken here.

Which multisets. With `cap_i` the most layers stage i can hold when its KV cache holds one
request of the class (the least any rating needs; at least the smallest profiled batch), a
multiset is memory-feasible iff sum cap_i >= L. Infeasible multisets are never built. Of the
feasible ones, by default (`PipelineSpace.MINIMAL`) we rate the *minimal* ones: those where
every stage is needed to hold the model (dropping any stage makes it infeasible). A
non-minimal pipeline adds a stage only for speed. This restriction of the search space is a
modelling choice, like the maximum depth, made for build time (all seeded models x 22 GPU
types rate ~12k minimal multisets of ~245k in the space), and is reported as such (counts
`enumerated` vs `evaluated`). It is NOT lossless and is not part of the dominance pruning,
whose losslessness is tested separately (in both spaces).

`PipelineSpace.ALL` rates every feasible multiset instead (extensions of feasible prefixes
too). On the small test world the minimal space misses some optima of the min-cost MILP (a
fast GPU paired with a slow one lets the slow one run at a larger batch under the TTFT SLO);
the benchmark reports how often and by how much.

Depth-first search over stage shapes sorted by capacity (largest first), extending only
infeasible prefixes (a feasible prefix plus a stage is not minimal) and cutting a branch when
even filling the remaining slots with the current capacity cannot reach L. Every leaf is
minimal (its smallest stage, the last added, is needed, so every stage is) and every minimal
multiset is a leaf (all its prefixes in that order are infeasible).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import comb

from planning.domain import GpuType, ModelArch, Phase, WorkloadClass
from planning.perf_table import PerfTable, StageKey
from planning.templates.evaluate import StageSpec
from planning.templates.params import TemplateParams
from planning.templates.stage_model import StageModel, StageShape, stage_model


def stage_models(
    arch: ModelArch,
    phase: Phase,
    gpus: Iterable[GpuType],
    tables: Iterable[tuple[StageKey, PerfTable]],
    params: TemplateParams,
) -> dict[StageShape, StageModel]:
    """Stage models of `arch` for `phase` (prefill or decode) that fit in memory somewhere."""
    allowed = {
        g.gpu_type: g.gpus_per_machine
        for g in gpus
        if params.gpu_types is None or g.gpu_type in params.gpu_types
    }
    groups: dict[StageShape, list[PerfTable]] = {}
    for key, table in tables:
        if (
            key.model == arch.model
            and key.phase is phase
            and key.dtype is arch.default_dtype
            and key.gpu_type in allowed
            and key.tp in params.tp_degrees
            and key.tp <= allowed[key.gpu_type]
            and key.num_layers <= arch.num_layers
        ):
            groups.setdefault(StageShape(key.gpu_type, key.tp), []).append(table)
    models = {shape: stage_model(group) for shape, group in sorted(groups.items(), key=_order)}
    return {shape: m for shape, m in models.items() if m is not None}


def _order(item: tuple[StageShape, object]) -> tuple[str, int]:
    return item[0].gpu_type, item[0].tp


def stage_specs(
    phase: Phase,
    prefill: dict[StageShape, StageModel],
    decode: dict[StageShape, StageModel],
) -> list[StageSpec]:
    """One spec per stage shape usable for `phase` (colocated needs both phases' profiles)."""
    if phase is Phase.PREFILL:
        return [StageSpec(m) for m in prefill.values()]
    if phase is Phase.DECODE:
        return [StageSpec(m) for m in decode.values()]
    return [StageSpec(decode[s], prefill[s]) for s in decode if s in prefill]


def class_capacity(spec: StageSpec, phase: Phase, wclass: WorkloadClass) -> int:
    """Most layers the stage holds with KV for one request of the class at its smallest batch,
    0 if the profiles do not cover the class's sequence length."""
    m = spec.primary
    if phase is Phase.PREFILL:
        seq: float = wclass.input_tokens
        tokens = m.min_batch * wclass.input_tokens
    else:
        seq = wclass.input_tokens + wclass.output_tokens / 2
        tokens = m.min_batch * (wclass.input_tokens + wclass.output_tokens)
    if not m.covers(m.min_batch, seq):
        return 0
    if spec.prefill is not None and not spec.prefill.covers(1, wclass.input_tokens):
        return 0
    return m.max_layers_for(tokens)


def minimal_multisets(
    caps: Sequence[int],
    total_layers: int,
    max_stages: int,
    kinds: Sequence[str] | None = None,
    max_kinds: int | None = None,
    minimal: bool = True,
) -> list[tuple[int, ...]]:
    """Index multisets (size <= max_stages) with sum cap >= total_layers, each stage needed
    (all feasible ones when `minimal` is False), using at most `max_kinds` distinct `kinds`
    (GPU types) when given."""
    order = sorted((i for i in range(len(caps)) if caps[i] > 0), key=lambda i: (-caps[i], i))
    kind_of = list(kinds) if kinds is not None else [str(i) for i in range(len(caps))]
    kind_limit = max_kinds if max_kinds is not None else max_stages
    found: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], start: int, held: int, used: frozenset[str]) -> None:
        slots_after = max_stages - len(prefix) - 1
        for pos in range(start, len(order)):
            i = order[pos]
            cap = caps[i]
            if held + cap * (1 + slots_after) < total_layers:
                break  # later shapes hold no more than this one: no completion reaches L
            now = used | {kind_of[i]}
            if len(now) > kind_limit:
                continue
            feasible = held + cap >= total_layers
            if feasible:
                found.append((*prefix, i))
            if slots_after > 0 and not (feasible and minimal):
                extend((*prefix, i), pos, held + cap, now)

    extend((), 0, 0, frozenset())
    return found


def count_multisets(
    kind_sizes: Sequence[int], max_stages: int, max_kinds: int | None = None
) -> int:
    """Multisets of 1..max_stages stage shapes drawn from kinds (GPU types) with the given
    numbers of shapes, using at most `max_kinds` kinds: the size of the unpruned search space.

    DP over kinds: ways[j][k] = multisets of k shapes from j kinds, each used kind contributing
    c >= 1 shapes in comb(n + c - 1, c) ways.
    """
    limit = len(kind_sizes) if max_kinds is None else min(max_kinds, len(kind_sizes))
    ways = [[0] * (max_stages + 1) for _ in range(limit + 1)]
    ways[0][0] = 1
    for n in kind_sizes:
        for j in range(limit, 0, -1):
            for k in range(max_stages, 0, -1):
                ways[j][k] += sum(ways[j - 1][k - c] * comb(n + c - 1, c) for c in range(1, k + 1))
    return sum(ways[j][k] for j in range(1, limit + 1) for k in range(1, max_stages + 1))
