"""Throughput of one pipeline (a multiset of stages) for one workload class under its SLOs.

Notation: class input length I and output length O tokens (per request), SLOs TTFT and TPOT;
pipeline of k stages; hand-off h(x) = x tokens x hidden x activation bytes / bandwidth + a
fixed latency, paid once per stage boundary (`TemplateParams`). Each evaluation searches the
largest integer batch inside the profiled range that meets the SLOs and memory (bisection,
assuming latency grows with batch, as every profiled grid does), and at each batch uses the
min-bottleneck layer split (`layer_split.best_split`) with every stage's memory limit.

Prefill (P/D, prompt of I tokens, KV handed to decode afterwards).
  Batch B of prompts, stage times t_i = prefill latency(n_i layers, B, I).
  Memory: each stage holds the batch's KV for its layers, B x I tokens.
  TTFT = sum t_i + (k-1) h(B x I) <= TTFT SLO  (the batch's path through the pipeline; queueing
  is left to placement's headroom).
  Throughput = B x I / max(max t_i, h(B x I)) tokens/s (one batch per bottleneck interval).

Decode. B requests per micro-batch, k micro-batches in flight (one per stage, as vLLM's PP
scheduler does), stage times t_i = decode step latency(n_i, B, context).
  Context: requests in a running batch are uniformly spread over their output, so the mean
  context (the profiles' decode `seq_len_tokens`) is I + O/2.
  Memory: a request is admitted only if its final KV fits: k x B x (I + O) tokens per stage.
  (I + O/2 would be the steady-state mean; reserving the final length avoids preemption, which
  would break the TPOT SLO.)
  A micro-batch's token interval: cycle = max(sum t_i + (k-1) h(B), k x max(max t_i, h(B))).
  TPOT = cycle <= TPOT SLO; throughput = k x B / cycle tokens/s. k = 1: B / t_1.

Colocated (one instance runs both phases with chunked prefill, as plain vLLM does).
  Each engine step runs D decode tokens plus a prefill chunk of C tokens. In steady state at
  r requests/s, decode tokens/s = r O = D / step and prefill tokens/s = r I = C / step, so
  C = D I / O. A chunk costs its share of the whole prompt's prefill, (C / I) x P(1, I)
  = (D / O) x P(1, I), where P(1, I) is the single-prompt prefill latency: work per prompt token,
  attention included, spread evenly over its chunks. Running the decode batch and the chunk as
  one step is approximated as the sum of the two latencies (both read the weights, so this is
  conservative). Stage time t_i = decode(n_i, D, I + O/2) + (D / O) x prefill(n_i, 1, I).
  With k micro-batches as in decode: TPOT = cycle; a prompt needs max(1, O / D) steps of its
  micro-batch, so TTFT = max(1, O / D) x cycle. Both SLOs must hold; memory k x D x (I + O).
  Requests/s = k x D / (O x cycle); stored tokens/s = requests/s x (I + O).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planning.domain import ModelArch, Phase, WorkloadClass
from planning.perf_table import OutOfProfileRange
from planning.templates.layer_split import LayerSplit, best_split
from planning.templates.params import TemplateParams
from planning.templates.stage_model import StageModel


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A pipeline's rating: split, batch and throughput at the largest batch meeting the SLOs."""

    split: LayerSplit
    batch: int
    throughput_tokens_per_s: float
    throughput_req_per_s: float | None
    latency_s: float  # TTFT (prefill) or TPOT (decode, colocated) at that batch


@dataclass(frozen=True, slots=True)
class StageSpec:
    """One stage of a candidate pipeline: its decode/prefill models for the phase evaluated.

    `primary` is the model of the phase (colocated: decode); `prefill` is set for colocated.
    """

    primary: StageModel
    prefill: StageModel | None = None


class PipelineEvaluator:
    """Rates pipelines of one model, phase and class; caches latency arrays per (stage, batch).

    Not a domain value: a short-lived helper owned by one build.
    """

    def __init__(
        self, arch: ModelArch, wclass: WorkloadClass, phase: Phase, params: TemplateParams
    ) -> None:
        self.arch = arch
        self.wclass = wclass
        self.phase = phase
        self.params = params
        self._cache: dict[tuple[int, int], NDArray[np.float64] | None] = {}

    def evaluate(self, stages: Sequence[StageSpec]) -> Evaluation | None:
        """Best rating of the pipeline, or None if no batch meets the SLOs and memory."""
        lo = max(s.primary.min_batch for s in stages)
        hi = min(s.primary.max_batch for s in stages)
        if lo > hi:
            return None
        best = self._at_batch(stages, lo)
        if best is None:
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            found = self._at_batch(stages, mid)
            if found is None:
                hi = mid - 1
            else:
                lo, best = mid, found
        return best if self._meets_ttft(best) else None

    def _meets_ttft(self, rating: Evaluation) -> bool:
        """Colocated TTFT, max(1, O / D) x cycle, falls as the batch D grows, so the bisection
        (over the monotone TPOT and memory limits) runs without it and checks it at the end."""
        if self.phase is not Phase.COLOCATED:
            return True
        w = self.wclass
        return max(1.0, w.output_tokens / rating.batch) * rating.latency_s <= w.ttft_slo_s

    def _handoff_s(self, tokens: float) -> float:
        p = self.params
        bytes_ = tokens * self.arch.hidden_size * p.activation_bytes
        return bytes_ / (p.handoff_gbytes_per_s * 1e9) + p.handoff_latency_s

    def _at_batch(self, stages: Sequence[StageSpec], batch: int) -> Evaluation | None:
        rate = _RATERS[self.phase]
        kv_tokens = _kv_tokens(self.phase, self.wclass, batch, len(stages))
        latencies = []
        for spec in stages:
            limit = spec.primary.max_layers_for(kv_tokens)
            lat = self._latencies(spec, batch)
            if limit < 1 or lat is None:
                return None
            latencies.append(lat[:limit])
        split = best_split(latencies, self.arch.num_layers)
        if split is None:
            return None
        return rate(self, split, batch, len(stages))

    def _latencies(self, spec: StageSpec, batch: int) -> NDArray[np.float64] | None:
        key = (id(spec.primary), batch)
        if key not in self._cache:
            self._cache[key] = self._compute_latencies(spec, batch)
        return self._cache[key]

    def _compute_latencies(self, spec: StageSpec, batch: int) -> NDArray[np.float64] | None:
        w = self.wclass
        try:
            if self.phase is Phase.PREFILL:
                return spec.primary.latency_by_layers(batch, w.input_tokens)
            decode = spec.primary.latency_by_layers(batch, w.input_tokens + w.output_tokens / 2)
            if self.phase is Phase.DECODE:
                return decode
            assert spec.prefill is not None  # colocated stages always carry both models
            prompt = spec.prefill.latency_by_layers(1, w.input_tokens)
        except OutOfProfileRange:
            return None
        n = min(len(decode), len(prompt))
        return decode[:n] + (batch / w.output_tokens) * prompt[:n]


def _kv_tokens(phase: Phase, w: WorkloadClass, batch: int, stages: int) -> float:
    if phase is Phase.PREFILL:
        return float(batch * w.input_tokens)
    return float(stages * batch * (w.input_tokens + w.output_tokens))


def _rate_prefill(
    ev: PipelineEvaluator, split: LayerSplit, batch: int, stages: int
) -> Evaluation | None:
    tokens = batch * ev.wclass.input_tokens
    handoff = ev._handoff_s(tokens) if stages > 1 else 0.0
    ttft = split.total_s + (stages - 1) * handoff
    if ttft > ev.wclass.ttft_slo_s:
        return None
    interval = max(split.bottleneck_s, handoff)
    return Evaluation(split, batch, tokens / interval, None, ttft)


def _cycle_s(ev: PipelineEvaluator, split: LayerSplit, tokens: float, stages: int) -> float:
    handoff = ev._handoff_s(tokens) if stages > 1 else 0.0
    return max(split.total_s + (stages - 1) * handoff, stages * max(split.bottleneck_s, handoff))


def _rate_decode(
    ev: PipelineEvaluator, split: LayerSplit, batch: int, stages: int
) -> Evaluation | None:
    cycle = _cycle_s(ev, split, batch, stages)
    if cycle > ev.wclass.tpot_slo_s:
        return None
    return Evaluation(split, batch, stages * batch / cycle, None, cycle)


def _rate_colocated(
    ev: PipelineEvaluator, split: LayerSplit, batch: int, stages: int
) -> Evaluation | None:
    w = ev.wclass
    cycle = _cycle_s(ev, split, batch * (1 + w.input_tokens / w.output_tokens), stages)
    if cycle > w.tpot_slo_s:  # TTFT is checked once, at the largest batch (see evaluate)
        return None
    req_per_s = stages * batch / (w.output_tokens * cycle)
    return Evaluation(
        split, batch, req_per_s * (w.input_tokens + w.output_tokens), req_per_s, cycle
    )


_Rater = Callable[[PipelineEvaluator, LayerSplit, int, int], Evaluation | None]
_RATERS: dict[Phase, _Rater] = {
    Phase.PREFILL: _rate_prefill,
    Phase.DECODE: _rate_decode,
    Phase.COLOCATED: _rate_colocated,
}
