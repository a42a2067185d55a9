"""The performance of one serving instance as data: latencies as functions, KV and batch limits.

`InstancePerf` is what the simulator and the routers (static, FluidPD) know about an instance.
Latencies are plain callables so tests can pass closed forms (`lambda b, s: 0.1`) and real runs
pass lookups over `planning.perf_table.PerfTable`s of the template's stages (`from_tables`).

Pipeline stages (a template with S stages): a batch's latency is the sum of its stage
latencies, but a new batch may enter the pipeline once the slowest stage is free, so the
issue interval is the slowest stage (`prefill_interval_s`). Decode templates are single-stage in
vLLM (DESIGN.md); if given several, step time is their sum (no micro-batch overlap).

Outside a table's profiled box the lookups clamp to its edge (the profiled grid is the only
truth we have); `clamp_count` of the `ClampCounter` records how often that happened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from planning.perf_table import PerfTable

LatencyFn = Callable[[int, float], float]  # (batch size, tokens) -> seconds

# vLLM V1's default `max_num_batched_tokens` for the OpenAI server on GPUs with >= 70 GiB
# (vllm/engine/arg_utils.py `_set_default_args_v1`, vLLM 0.8-0.10; 2048 on smaller GPUs).
# Used for every instance unless the caller passes its own budget.
DEFAULT_PREFILL_TOKEN_BUDGET = 8192
# vLLM's default `max_num_seqs` (requests in one running batch).
DEFAULT_MAX_BATCH = 256


@dataclass(slots=True)
class ClampCounter:
    """Counts lookups that fell outside a profiled grid and were clamped to its edge."""

    clamp_count: int = field(default=0)


@dataclass(frozen=True, slots=True)
class InstancePerf:
    """What one instance can do.

    prefill_s(n, mean_prompt_tokens): seconds for a batch of n prompts through all stages.
    prefill_interval_s(n, mean_prompt_tokens): seconds before the next batch may start
      (the slowest pipeline stage); equal to prefill_s for one stage.
    decode_step_s(batch, mean_context_tokens): seconds of one decode step of the batch.
    kv_capacity_tokens: KV-cache tokens the instance holds (all its GPUs).
    kv_bytes_per_token: KV bytes of one token for the whole model (what a P->D transfer moves).
    max_batch: running decode requests at most (vLLM max_num_seqs).
    prefill_token_budget: prompt tokens per prefill batch, and per chunk when chunking.
    """

    name: str
    model: str
    prefill_s: LatencyFn
    decode_step_s: LatencyFn
    kv_capacity_tokens: int
    kv_bytes_per_token: float
    gpus: int
    usd_per_hr: float
    max_batch: int = DEFAULT_MAX_BATCH
    prefill_token_budget: int = DEFAULT_PREFILL_TOKEN_BUDGET
    prefill_interval_s: LatencyFn | None = None
    clamps: ClampCounter | None = None  # counts lookups clamped to the profiled grid

    def issue_interval_s(self, n: int, mean_prompt_tokens: float) -> float:
        fn = self.prefill_interval_s or self.prefill_s
        return fn(n, mean_prompt_tokens)

    @property
    def prefill_tokens_per_s(self) -> float:
        """Nominal prefill throughput: one full-budget prompt per issue interval."""
        budget = self.prefill_token_budget
        return budget / self.issue_interval_s(1, float(budget))


def _clamped(table: PerfTable, counter: ClampCounter) -> LatencyFn:
    b_lo, b_hi = table.batches[0], table.batches[-1]
    s_lo, s_hi = table.seq_lens[0], table.seq_lens[-1]

    def lookup(batch: int, tokens: float) -> float:
        b = min(max(batch, b_lo), b_hi)
        s = min(max(tokens, s_lo), s_hi)
        if b != batch or s != tokens:
            counter.clamp_count += 1
        return table.latency_s(b, s)

    return lookup


def _summed(fns: Sequence[LatencyFn]) -> LatencyFn:
    if len(fns) == 1:
        return fns[0]
    return lambda batch, tokens: sum(fn(batch, tokens) for fn in fns)


def _slowest(fns: Sequence[LatencyFn]) -> LatencyFn:
    if len(fns) == 1:
        return fns[0]
    return lambda batch, tokens: max(fn(batch, tokens) for fn in fns)


def from_tables(
    name: str,
    prefill_tables: Sequence[PerfTable],
    decode_tables: Sequence[PerfTable],
    *,
    usd_per_hr: float,
    gpus: int,
    kv_capacity_tokens: int,
    kv_bytes_per_token: float,
    max_batch: int = DEFAULT_MAX_BATCH,
    prefill_token_budget: int = DEFAULT_PREFILL_TOKEN_BUDGET,
    pp_handoff_s: float = 0.0,
    counter: ClampCounter | None = None,
) -> InstancePerf:
    """An instance whose stages are the given tables, in pipeline order.

    A prefill-only instance may pass no decode tables (and vice versa); the missing phase then
    raises if used. `pp_handoff_s` is added once per stage boundary to a prefill batch.
    """
    count = counter if counter is not None else ClampCounter()
    pre = [_clamped(t, count) for t in prefill_tables]
    dec = [_clamped(t, count) for t in decode_tables]
    handoff_s = pp_handoff_s * max(0, len(pre) - 1)
    pre_sum = _summed(pre) if pre else _missing("prefill", name)
    model = (prefill_tables or decode_tables)[0].key.model
    return InstancePerf(
        name=name,
        model=model,
        prefill_s=(lambda b, s: pre_sum(b, s) + handoff_s) if handoff_s else pre_sum,
        decode_step_s=_summed(dec) if dec else _missing("decode", name),
        kv_capacity_tokens=kv_capacity_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        gpus=gpus,
        usd_per_hr=usd_per_hr,
        max_batch=max_batch,
        prefill_token_budget=prefill_token_budget,
        prefill_interval_s=_slowest(pre) if len(pre) > 1 else None,
        clamps=count,
    )


def _missing(phase: str, name: str) -> LatencyFn:
    def fail(batch: int, tokens: float) -> float:
        raise ValueError(f"instance {name} has no {phase} profile; it cannot run {phase}")

    return fail
