"""Workloads as pure values: requests, traces, multi-model mixes and per-window summaries.

A `Trace` is a time-ordered tuple of `Request`s with arrival times in seconds from the trace's
origin. Everything here is pure: loading files lives in `catalog_db.traces`.

- `time_slice(trace, offset_s, duration_s, rate_scale)` replays a trace from an offset, faster or
  slower, wrapping around its end so any window length can be filled.
- `multi_model_workload(base, specs, total_rate_req_per_s, ...)` builds N models whose popularity
  follows a Zipf law, each fed by its own time-shifted, rate-scaled slice of one base trace
  (different offsets decorrelate their bursts), each with its own SLOs.
- `summarise(trace, window_s)` gives rate, mean and p90 input/output tokens per model per window;
  `demands(workload)` turns them into `planning.domain.ModelDemand` values for placement.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from planning.domain import ModelDemand

DEFAULT_MODEL = ""  # the model of a single-model trace before it is assigned to one


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request: when it arrives, how long its prompt is, how many tokens it wants."""

    request_id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    model: str = DEFAULT_MODEL


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests ordered by arrival; `duration_s` is the span the trace covers (>= last arrival).

    `origin` is the wall-clock time of `arrival_s == 0` when the trace came from a file.
    """

    name: str
    requests: tuple[Request, ...]
    duration_s: float
    origin: datetime | None = None

    @property
    def rate_req_per_s(self) -> float:
        return len(self.requests) / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted({r.model for r in self.requests}))


def make_trace(
    name: str,
    rows: Iterable[tuple[float, int, int]],
    duration_s: float | None = None,
    origin: datetime | None = None,
    model: str = DEFAULT_MODEL,
) -> Trace:
    """A trace from (arrival_s, input_tokens, output_tokens) rows, sorted and numbered.

    Without `duration_s` the trace spans up to its last arrival.
    """
    ordered = sorted(rows, key=lambda row: row[0])
    requests = tuple(
        Request(i, float(t), int(n_in), int(n_out), model)
        for i, (t, n_in, n_out) in enumerate(ordered)
    )
    span = requests[-1].arrival_s if requests else 0.0
    return Trace(name, requests, span if duration_s is None else duration_s, origin)


def time_slice(
    trace: Trace,
    offset_s: float,
    duration_s: float,
    rate_scale: float = 1.0,
    model: str | None = None,
) -> Trace:
    """Replay `trace` from `offset_s` (trace time) for `duration_s` seconds, `rate_scale` x faster.

    Request at new time t is the original request at (offset_s + t * rate_scale) modulo the
    trace's duration: the trace wraps around, so a 1-hour trace can feed any window at any rate.
    Request ids are renumbered; `model` relabels every request when given.
    """
    if rate_scale <= 0 or duration_s < 0 or trace.duration_s <= 0:
        raise ValueError("time_slice needs rate_scale > 0, duration_s >= 0 and a non-empty trace")
    period_s = trace.duration_s / rate_scale
    start_s = (offset_s % trace.duration_s) / rate_scale
    times = [r.arrival_s / rate_scale for r in trace.requests]
    out: list[Request] = []
    cycle = 0
    while cycle * period_s - start_s < duration_s:
        base_s = cycle * period_s - start_s
        for r, t in zip(trace.requests, times, strict=True):
            new_t = base_s + t
            if 0.0 <= new_t < duration_s:
                label = r.model if model is None else model
                out.append(Request(0, new_t, r.input_tokens, r.output_tokens, label))
        cycle += 1
    out.sort(key=lambda r: r.arrival_s)
    numbered = tuple(replace(r, request_id=i) for i, r in enumerate(out))
    return Trace(
        f"{trace.name}[{offset_s:g}s+{duration_s:g}s x{rate_scale:g}]", numbered, duration_s
    )


def scale_rate(trace: Trace, factor: float) -> Trace:
    """The same window with `factor` x the arrival rate (the trace compressed and tiled)."""
    return replace(time_slice(trace, 0.0, trace.duration_s, factor), origin=trace.origin)


def merge(name: str, traces: Sequence[Trace]) -> Trace:
    """Interleave traces by arrival time into one, renumbering requests."""
    merged = sorted((r for t in traces for r in t.requests), key=lambda r: (r.arrival_s, r.model))
    requests = tuple(replace(r, request_id=i) for i, r in enumerate(merged))
    duration_s = max((t.duration_s for t in traces), default=0.0)
    return Trace(name, requests, duration_s)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model of a multi-model workload with its SLOs (seconds) and priority weight."""

    model: str
    ttft_slo_s: float
    tpot_slo_s: float
    workload_class: str = "chat"
    priority: float = 1.0


@dataclass(frozen=True, slots=True)
class Workload:
    """A (multi-model) trace together with the SLOs of each model in it."""

    trace: Trace
    specs: tuple[ModelSpec, ...]

    def spec(self, model: str) -> ModelSpec:
        for s in self.specs:
            if s.model == model:
                return s
        raise KeyError(f"workload has no spec for model {model!r}")


def zipf_shares(n: int, exponent: float = 1.0) -> tuple[float, ...]:
    """Popularity shares of n models under Zipf's law: share_k ∝ 1 / k**exponent, summing to 1."""
    if n < 1:
        raise ValueError("zipf_shares needs n >= 1")
    weights = [1.0 / (k**exponent) for k in range(1, n + 1)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def multi_model_workload(
    base: Trace,
    specs: Sequence[ModelSpec],
    total_rate_req_per_s: float,
    duration_s: float,
    zipf_exponent: float = 1.0,
    seed: int = 0,
) -> Workload:
    """N models with Zipf popularity (specs in rank order), each a shifted, rate-scaled slice.

    Model k gets rate total * share_k, from `base` started at a seeded random offset, so bursts
    of different models do not line up. Deterministic for a seed.
    """
    rng = random.Random(seed)
    shares = zipf_shares(len(specs), zipf_exponent)
    slices = []
    for spec, share in zip(specs, shares, strict=True):
        offset_s = rng.uniform(0.0, base.duration_s)
        scale = total_rate_req_per_s * share / base.rate_req_per_s
        slices.append(time_slice(base, offset_s, duration_s, scale, model=spec.model))
    name = f"{base.name}:{len(specs)}models@{total_rate_req_per_s:g}rps,zipf{zipf_exponent:g}"
    return Workload(merge(name, slices), tuple(specs))


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """Demand of one model in one window [start_s, end_s) of trace time."""

    model: str
    window_start_s: float
    window_end_s: float
    requests: int
    rate_req_per_s: float
    mean_input_tokens: float
    mean_output_tokens: float
    p90_input_tokens: float
    p90_output_tokens: float

    def to_demand(self, spec: ModelSpec) -> ModelDemand:
        """The placement input for this window, with the model's SLOs from `spec`."""
        return ModelDemand(
            model=self.model,
            rate_req_per_s=self.rate_req_per_s,
            mean_input_tokens=self.mean_input_tokens,
            mean_output_tokens=self.mean_output_tokens,
            ttft_slo_s=spec.ttft_slo_s,
            tpot_slo_s=spec.tpot_slo_s,
            workload_class=spec.workload_class,
            priority=spec.priority,
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics (numpy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarise(trace: Trace, window_s: float | None = None) -> tuple[WindowSummary, ...]:
    """Rate, mean and p90 input/output tokens per model per window (whole trace if no window).

    Windows tile [0, duration_s); a model with no request in a window gets a zero-rate row
    (token statistics 0) so forecasts see the gap.
    """
    span_s = trace.duration_s
    width_s = span_s if window_s is None else window_s
    if width_s <= 0:
        raise ValueError("summarise needs a positive window and a trace with a duration")
    n_windows = max(1, math.ceil(span_s / width_s - 1e-9))
    buckets: dict[tuple[str, int], list[Request]] = {}
    for r in trace.requests:
        index = min(int(r.arrival_s // width_s), n_windows - 1)
        buckets.setdefault((r.model, index), []).append(r)
    out = []
    for model in trace.models:
        for index in range(n_windows):
            start_s = index * width_s
            end_s = min(span_s, start_s + width_s)
            out.append(_summary(model, start_s, end_s, buckets.get((model, index), [])))
    return tuple(out)


def _summary(model: str, start_s: float, end_s: float, reqs: list[Request]) -> WindowSummary:
    n = len(reqs)
    inputs = [float(r.input_tokens) for r in reqs]
    outputs = [float(r.output_tokens) for r in reqs]
    return WindowSummary(
        model=model,
        window_start_s=start_s,
        window_end_s=end_s,
        requests=n,
        rate_req_per_s=n / (end_s - start_s) if end_s > start_s else 0.0,
        mean_input_tokens=sum(inputs) / n if n else 0.0,
        mean_output_tokens=sum(outputs) / n if n else 0.0,
        p90_input_tokens=percentile(inputs, 0.9),
        p90_output_tokens=percentile(outputs, 0.9),
    )


def demands(
    workload: Workload, window_s: float | None = None, window_index: int = -1
) -> tuple[ModelDemand, ...]:
    """`ModelDemand` per model for one window (default: the whole trace; -1 = the last window).

    Models absent from that window are left out (ModelDemand needs positive token means).
    """
    rows = summarise(workload.trace, window_s)
    by_model: dict[str, list[WindowSummary]] = {}
    for row in rows:
        by_model.setdefault(row.model, []).append(row)
    out = []
    for model, windows in by_model.items():
        chosen = windows[window_index]
        if chosen.requests:
            out.append(chosen.to_demand(workload.spec(model)))
    return tuple(out)


def assign_models(
    base: Trace, specs: Sequence[ModelSpec], rates_req_per_s: dict[str, float] | None = None
) -> Workload:
    """Feed each model of `specs` from one trace: one model takes the trace as is; several
    take evenly spaced time-shifted slices at their rate from `rates_req_per_s` (missing or 0:
    an equal share of the trace's rate), over the trace's duration."""
    if len(specs) == 1:
        relabelled = tuple(replace(r, model=specs[0].model) for r in base.requests)
        return Workload(Trace(base.name, relabelled, base.duration_s, base.origin), tuple(specs))
    rates = rates_req_per_s or {}
    slices = []
    for k, spec in enumerate(specs):
        rate = rates.get(spec.model) or base.rate_req_per_s / len(specs)
        offset_s = k * base.duration_s / len(specs)
        scale = rate / base.rate_req_per_s
        slices.append(time_slice(base, offset_s, base.duration_s, scale, model=spec.model))
    return Workload(merge(f"{base.name}:{len(specs)}models", slices), tuple(specs))
