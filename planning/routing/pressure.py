"""FluidPD pressure indicators: how close each worker is to its SLO, 1.0 = at the boundary.

- Prefill pressure p_P = predicted TTFT of a request arriving now / TTFT SLO, where the TTFT is
  the time to prefill every prompt token already queued or in flight on the worker plus the new
  prompt, plus the KV transfer of the new prompt to a decode worker.
- Decode pressure p_D = max(KV-cache usage / high watermark, predicted TPOT at the current batch
  plus one more sequence / TPOT SLO).

Inputs are the router's own in-flight token accounting (timely) and, where an engine reports it,
its measured KV usage. Latencies come from a `StepLatencyModel` (the perf model); a linear one is
provided, fitted from profile tables or written by hand. Pure functions, no IO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from planning.perf_table import PerfTable


class StepLatencyModel(Protocol):
    """The perf model as FluidPD needs it: one worker's batch latencies, no queueing."""

    def prefill_s(self, prompt_tokens: float) -> float:
        """Seconds to prefill a batch holding `prompt_tokens` prompt tokens in total."""
        ...

    def decode_step_s(
        self, batch: int, context_tokens: float, prefill_tokens: float = 0.0
    ) -> float:
        """Seconds of one decode step of `batch` sequences holding `context_tokens` of KV in
        total, with `prefill_tokens` of chunked prefill piggy-backed on the step."""
        ...

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        """Seconds to move the KV cache of `prompt_tokens` from a prefill to a decode worker."""
        ...

    def max_chunk_tokens(self, batch: int) -> int:
        """Most prefill tokens one step may carry beside `batch` decode tokens (the engine's
        token budget, vLLM `--max-num-batched-tokens`)."""
        ...


@dataclass(frozen=True, slots=True)
class LinearStepModel:
    """Latencies linear in tokens and batch: the roofline regime of one serving instance.

    prefill_s = prefill_fixed_s + tokens × prefill_s_per_token;
    decode_step_s = decode_fixed_s + batch × decode_s_per_seq + context × decode_s_per_context_token
                    + prefill_tokens × prefill_s_per_token.
    """

    prefill_fixed_s: float
    prefill_s_per_token: float
    decode_fixed_s: float
    decode_s_per_seq: float
    decode_s_per_context_token: float
    kv_transfer_s_per_token: float
    kv_capacity_tokens: int

    def prefill_s(self, prompt_tokens: float) -> float:
        if prompt_tokens <= 0:
            return 0.0
        return self.prefill_fixed_s + prompt_tokens * self.prefill_s_per_token

    def decode_step_s(
        self, batch: int, context_tokens: float, prefill_tokens: float = 0.0
    ) -> float:
        return (
            self.decode_fixed_s
            + batch * self.decode_s_per_seq
            + context_tokens * self.decode_s_per_context_token
            + prefill_tokens * self.prefill_s_per_token
        )

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        return prompt_tokens * self.kv_transfer_s_per_token

    def max_chunk_tokens(self, batch: int) -> int:
        return max(self.kv_capacity_tokens, 1)


def fit_linear_model(
    prefill: PerfTable, decode: PerfTable, kv_transfer_s_per_token: float
) -> LinearStepModel:
    """Least-squares-free two-point fit of a `LinearStepModel` to profile tables.

    Prefill: slope and intercept from the smallest and largest prompt at batch 1. Decode: the
    fixed cost from (smallest batch, shortest context); per-sequence and per-context-token slopes
    from the far corners of the grid. KV capacity from the decode table (0 if unknown).
    """
    b0, s0, s1 = prefill.batches[0], prefill.seq_lens[0], prefill.seq_lens[-1]
    p0, p1 = prefill.latency_s(b0, s0), prefill.latency_s(b0, s1)
    per_token = (p1 - p0) / max(b0 * (s1 - s0), 1)
    db0, db1 = decode.batches[0], decode.batches[-1]
    dc0, dc1 = decode.seq_lens[0], decode.seq_lens[-1]
    base = decode.latency_s(db0, dc0)
    per_ctx = (decode.latency_s(db0, dc1) - base) / max(db0 * (dc1 - dc0), 1)
    per_seq = (decode.latency_s(db1, dc0) - base - per_ctx * (db1 - db0) * dc0) / max(db1 - db0, 1)
    return LinearStepModel(
        prefill_fixed_s=max(p0 - per_token * b0 * s0, 0.0),
        prefill_s_per_token=max(per_token, 0.0),
        decode_fixed_s=max(base - per_seq * db0 - per_ctx * db0 * dc0, 0.0),
        decode_s_per_seq=max(per_seq, 0.0),
        decode_s_per_context_token=max(per_ctx, 0.0),
        kv_transfer_s_per_token=kv_transfer_s_per_token,
        kv_capacity_tokens=decode.max_kv_tokens or 0,
    )


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """What the policy knows of one worker now (router accounting plus scraped metrics).

    `queued_prompt_tokens`: prompt tokens waiting or being prefilled (P/D prefill work, or local
    FluidToken prefill on a decode worker). `running_seqs` / `context_tokens`: sequences decoding
    and the KV tokens they hold. `kv_usage_frac`: the engine's reported KV usage in [0, 1], or None
    to derive it from `context_tokens / kv_capacity_tokens`.
    """

    queued_prompt_tokens: float = 0.0
    running_seqs: int = 0
    context_tokens: float = 0.0
    kv_usage_frac: float | None = None


def predicted_ttft_pd_s(load: WorkerLoad, prompt_tokens: float, perf: StepLatencyModel) -> float:
    """TTFT (s) of a new P/D request on this prefill worker: queue + own prefill + KV transfer."""
    return perf.prefill_s(load.queued_prompt_tokens + prompt_tokens) + perf.kv_transfer_s(
        prompt_tokens
    )


def prefill_pressure(
    load: WorkerLoad, prompt_tokens: float, perf: StepLatencyModel, ttft_slo_s: float
) -> float:
    """p_P: predicted TTFT of a request of `prompt_tokens` arriving now over the TTFT SLO."""
    return predicted_ttft_pd_s(load, prompt_tokens, perf) / ttft_slo_s


def kv_usage(load: WorkerLoad, kv_capacity_tokens: int) -> float:
    """KV-cache usage in [0, 1]: the engine's figure when known, else from accounted tokens."""
    if load.kv_usage_frac is not None:
        return load.kv_usage_frac
    if kv_capacity_tokens <= 0:
        return 0.0
    return load.context_tokens / kv_capacity_tokens


def predicted_tpot_s(load: WorkerLoad, perf: StepLatencyModel, chunk_tokens: float = 0.0) -> float:
    """TPOT (s) of the current batch plus one more sequence, with an optional prefill chunk."""
    per_seq = load.context_tokens / load.running_seqs if load.running_seqs else 0.0
    return perf.decode_step_s(load.running_seqs + 1, load.context_tokens + per_seq, chunk_tokens)


def decode_pressure(
    load: WorkerLoad,
    perf: StepLatencyModel,
    tpot_slo_s: float,
    kv_high_watermark: float,
    kv_capacity_tokens: int,
) -> float:
    """p_D = max(KV usage / high watermark, predicted TPOT / TPOT SLO).

    Local prefill work queued on the worker (FluidToken) counts through the chunk it adds to
    each step, capped at what is queued.
    """
    chunk = 0.0
    if load.queued_prompt_tokens > 0:
        chunk = min(load.queued_prompt_tokens, _largest_chunk(load, perf, tpot_slo_s, 1.0))
    tpot = predicted_tpot_s(load, perf, chunk)
    return max(kv_usage(load, kv_capacity_tokens) / kv_high_watermark, tpot / tpot_slo_s)


def _largest_chunk(
    load: WorkerLoad, perf: StepLatencyModel, tpot_slo_s: float, max_step_share: float
) -> int:
    """Largest prefill chunk (tokens) whose step stays within the TPOT SLO and whose own share
    of the step stays within `max_step_share` of the SLO. Bisection: any monotone model works."""
    base = perf.decode_step_s(load.running_seqs, load.context_tokens, 0.0)
    limit = min(tpot_slo_s, base + max_step_share * tpot_slo_s)
    low, high = 0, 1
    while (
        high < 1 << 20 and perf.decode_step_s(load.running_seqs, load.context_tokens, high) <= limit
    ):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if perf.decode_step_s(load.running_seqs, load.context_tokens, mid) <= limit:
            low = mid
        else:
            high = mid
    return low


def fluid_token_chunk_tokens(
    load: WorkerLoad, perf: StepLatencyModel, tpot_slo_s: float, max_step_share: float
) -> int:
    """FluidToken's token budget per step on a decode worker: the largest prefill chunk that
    keeps its step under the TPOT SLO, capped by `max_step_share` of the step's SLO time."""
    return _largest_chunk(load, perf, tpot_slo_s, max_step_share)


def predicted_ttft_local_s(
    load: WorkerLoad, prompt_tokens: float, perf: StepLatencyModel, chunk_tokens: int
) -> float:
    """TTFT (s) of prefilling `prompt_tokens` locally on a decode worker in chunks of
    `chunk_tokens`, behind the local prefill already queued there; inf when no chunk fits."""
    if chunk_tokens <= 0:
        return math.inf
    steps = math.ceil((load.queued_prompt_tokens + prompt_tokens) / chunk_tokens)
    return steps * perf.decode_step_s(load.running_seqs + 1, load.context_tokens, chunk_tokens)
