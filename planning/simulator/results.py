"""What a simulation run returns: per-request latencies and per-run aggregates, as frozen values.

Definitions (as vLLM's `benchmark_serving` reports them):
- TTFT = first token time - arrival. In a P/D split the first token reaches the user when the
  KV cache has landed on the decode instance (prefill queue + prefill + D admission + transfer).
- TPOT = (finish - first token) / (output tokens - 1); 0 for one-token outputs.
- SLO attainment = requests meeting both TTFT and TPOT SLOs / all requests (dropped and
  unfinished count as misses); goodput = those requests / trace duration (req/s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planning.domain import Phase
from planning.workload import percentile


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request that finished: where it ran and how long it took (seconds)."""

    request_id: int
    model: str
    arrival_s: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    prefill_instance: int | None  # None: prefilled locally on the decode instance
    decode_instance: int
    met_slo: bool
    region: str = ""  # where it was served (its decode instance's region)
    # seconds from arrival until its prompt started prefilling: the prefill instance's queue
    # (P/D), or the wait for a batch slot and KV space on the serving instance (local prefill)
    queue_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RoleChangeRecord:
    """A role flip that completed at `at_s` (requested at `requested_s`)."""

    instance_id: int
    from_role: Phase
    to_role: Phase
    requested_s: float
    at_s: float


@dataclass(frozen=True, slots=True)
class InstanceUsage:
    """One instance over the run: busy fraction of the makespan, GPUs and $ per hour."""

    instance_id: int
    name: str
    final_role: Phase
    busy_s: float
    utilisation: float
    gpus: int
    usd_per_hr: float
    model: str = ""
    region: str = ""


@dataclass(frozen=True, slots=True)
class ModelAttainment:
    model: str
    requests: int
    met_slo: int

    @property
    def slo_attainment(self) -> float:
        return self.met_slo / self.requests if self.requests else 1.0


@dataclass(frozen=True, slots=True)
class SimResult:
    """Aggregates of one run plus the per-request detail."""

    trace: str
    policy: str
    seed: int
    requests: int
    completed: int
    dropped: int
    unfinished: int  # still in flight when the horizon stopped the clock
    drop_reasons: Mapping[str, int]
    slo_attainment: float
    goodput_req_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    e2e_p50_s: float
    e2e_p99_s: float
    trace_duration_s: float
    simulated_s: float  # makespan: the time of the last event
    gpu_hours: float  # every instance held for the makespan
    cost_usd: float
    mean_utilisation: float
    events: int
    perf_clamped_lookups: int
    per_model: tuple[ModelAttainment, ...]
    instances: tuple[InstanceUsage, ...]
    role_changes: tuple[RoleChangeRecord, ...]
    per_request: tuple[RequestResult, ...]


@dataclass(frozen=True, slots=True)
class RunTotals:
    """Counts the engine hands to `aggregate` besides the per-request results."""

    trace: str
    policy: str
    seed: int
    requests: int
    drop_reasons: Mapping[str, int]
    trace_duration_s: float
    simulated_s: float
    events: int
    perf_clamped_lookups: int


def aggregate(
    totals: RunTotals,
    finished: Sequence[RequestResult],
    instances: Sequence[InstanceUsage],
    role_changes: Sequence[RoleChangeRecord],
    requests_per_model: Mapping[str, int],
) -> SimResult:
    """Fold per-request results into the run's SLO attainment, percentiles, GPU-hours and $."""
    met = sum(1 for r in finished if r.met_slo)
    dropped = sum(totals.drop_reasons.values())
    hours = totals.simulated_s / 3600.0
    ttfts = [r.ttft_s for r in finished]
    tpots = [r.tpot_s for r in finished]
    e2es = [r.e2e_s for r in finished]
    return SimResult(
        trace=totals.trace,
        policy=totals.policy,
        seed=totals.seed,
        requests=totals.requests,
        completed=len(finished),
        dropped=dropped,
        unfinished=totals.requests - len(finished) - dropped,
        drop_reasons=dict(totals.drop_reasons),
        slo_attainment=met / totals.requests if totals.requests else 1.0,
        goodput_req_per_s=met / totals.trace_duration_s if totals.trace_duration_s > 0 else 0.0,
        ttft_p50_s=percentile(ttfts, 0.5),
        ttft_p99_s=percentile(ttfts, 0.99),
        tpot_p50_s=percentile(tpots, 0.5),
        tpot_p99_s=percentile(tpots, 0.99),
        e2e_p50_s=percentile(e2es, 0.5),
        e2e_p99_s=percentile(e2es, 0.99),
        trace_duration_s=totals.trace_duration_s,
        simulated_s=totals.simulated_s,
        gpu_hours=sum(u.gpus for u in instances) * hours,
        cost_usd=sum(u.usd_per_hr for u in instances) * hours,
        mean_utilisation=sum(u.utilisation for u in instances) / len(instances)
        if instances
        else 0.0,
        events=totals.events,
        perf_clamped_lookups=totals.perf_clamped_lookups,
        per_model=_per_model(finished, requests_per_model),
        instances=tuple(instances),
        role_changes=tuple(role_changes),
        per_request=tuple(finished),
    )


def _per_model(
    finished: Sequence[RequestResult], requests_per_model: Mapping[str, int]
) -> tuple[ModelAttainment, ...]:
    counts = {m: [n, 0] for m, n in requests_per_model.items()}
    for r in finished:
        if r.met_slo:
            counts[r.model][1] += 1
    return tuple(ModelAttainment(m, c[0], c[1]) for m, c in sorted(counts.items()))
