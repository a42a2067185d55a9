"""The discrete-event loop: arrivals -> router -> prefill -> KV transfer -> decode -> done.

Per request:
1. arrival: the router (`planning.routing`) sees a `ClusterState` and returns a `Route`
   (prefill instance + decode instance, or a decode/colocated instance alone) or a `Reject`;
2. P/D split: the prompt waits in the prefill instance's FIFO queue; the instance takes as many
   queued prompts as fit its token budget (at least one) into a batch whose latency comes from
   the perf model (all pipeline stages); a new batch may start after the slowest stage;
3. the decode instance admits the request when a batch slot and KV space for prompt + output
   tokens are free (FIFO, vLLM's FCFS); then the prompt's KV cache crosses the P->D link
   (prompt tokens x KV bytes per token / link bandwidth); the first token reaches the user then;
4. decode: continuous batching, one token per running request per step, step time from the
   perf model at (batch size, mean context); leaves the batch after its last token;
   locally routed prompts (colocated instances, FluidToken) are prefilled in chunks that share
   a step with the decode batch (vLLM chunked prefill: decode tokens + chunk <= token budget).
Router `control` ticks deliver role changes (drain, then flip). Events are ordered by
(time, sequence number), so a run is a deterministic function of its inputs and seed.

Modelling assumptions (documented, not hidden): a mixed chunked-prefill step costs decode step +
prefill of the chunk (conservative: the fixed per-step cost is paid twice); a mixed-length
prefill batch costs the table's latency at the batch's mean prompt length; KV transfers do not
contend for the link; prefill instances hold KV only until it is sent (not modelled).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planning.domain import Phase
from planning.routing.base_router import (
    DEFAULT_LINK_GBPS,
    ClusterState,
    Reject,
    RoleChange,
    Route,
    Router,
)
from planning.routing.instance_perf import InstancePerf
from planning.simulator.instance_state import InstanceState
from planning.simulator.results import (
    InstanceUsage,
    RequestResult,
    RoleChangeRecord,
    RunTotals,
    SimResult,
    aggregate,
)
from planning.workload import Request, Workload

_PREFILL_DONE, _PREFILL_FREE, _TRANSFER_DONE, _STEP_END, _CONTROL = range(5)


@dataclass(frozen=True, slots=True)
class SimInstance:
    """One serving instance of the simulated deployment, its starting role and where it runs."""

    perf: InstancePerf
    role: Phase
    region: str = ""
    cloud: str = ""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Run parameters: P->D link bandwidth (Gb/s), seed, optional stop time (s), and the
    per-model split of arrivals over regions (`{model: {region: weight}}`; a model without an
    entry arrives in no particular region and the router picks one pool)."""

    link_gbps: float = DEFAULT_LINK_GBPS
    seed: int = 0
    horizon_s: float | None = None
    region_split: Mapping[str, Mapping[str, float]] | None = None


def assign_regions(
    requests: Sequence[Request], split: Mapping[str, Mapping[str, float]] | None
) -> list[str | None]:
    """The region each request arrives in: per model, in proportion to the split's weights.

    Deterministic and smooth (largest deficit first, ties by region name): after n requests of a
    model, each region has received n x its share rounded to within one request, so a burst is
    shared between regions as the average demand is.
    """
    out: list[str | None] = [None] * len(requests)
    if not split:
        return out
    shares: dict[str, list[tuple[str, float]]] = {}
    for model, weights in split.items():
        total = sum(w for w in weights.values() if w > 0)
        if total > 0:
            shares[model] = sorted((r, w / total) for r, w in weights.items() if w > 0)
    seen: dict[str, int] = {}
    given: dict[tuple[str, str], int] = {}
    for i, req in enumerate(requests):
        model_shares = shares.get(req.model)
        if model_shares is None:
            continue
        n = seen.get(req.model, 0) + 1
        seen[req.model] = n
        region = max(model_shares, key=lambda rs: n * rs[1] - given.get((req.model, rs[0]), 0))[0]
        given[(req.model, region)] = given.get((req.model, region), 0) + 1
        out[i] = region
    return out


def run(
    workload: Workload,
    instances: Sequence[SimInstance],
    router: Router,
    config: SimConfig | None = None,
) -> SimResult:
    """Simulate `workload` on `instances` under `router`; deterministic for a seed."""
    sim = _Sim(workload, instances, router, config or SimConfig())
    sim.loop()
    return sim.result()


class _Sim:
    """The run's mutable world: event heap, instance states, per-request timestamps."""

    def __init__(
        self,
        workload: Workload,
        instances: Sequence[SimInstance],
        router: Router,
        config: SimConfig,
    ) -> None:
        self.workload = workload
        self.router = router
        self.config = config
        self.specs = {s.model: s for s in workload.specs}
        reqs = workload.trace.requests
        missing = {r.model for r in reqs} - set(self.specs)
        if missing:
            raise ValueError(f"workload has requests of models without SLOs: {sorted(missing)}")
        self.n_in = [r.input_tokens for r in reqs]
        self.n_out = [r.output_tokens for r in reqs]
        nan = math.nan
        self.first = [nan] * len(reqs)
        self.finish = [nan] * len(reqs)
        self.p_inst = [-1] * len(reqs)
        self.d_inst = [-1] * len(reqs)
        self.joined = [0] * len(reqs)
        self.started = [nan] * len(reqs)  # when its prompt started prefilling
        self.region = assign_regions(reqs, config.region_split)
        self.insts = [
            InstanceState(i, s.perf, s.role, s.region, s.cloud) for i, s in enumerate(instances)
        ]
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.events = 0
        self.now = 0.0
        self.drops: dict[str, int] = {}
        self.role_changes: list[RoleChangeRecord] = []
        self.bits_per_s = config.link_gbps * 1e9
        self.counters = {id(s.perf.clamps): s.perf.clamps for s in instances if s.perf.clamps}
        self.clamps_before = sum(c.clamp_count for c in self.counters.values())

    def push(self, time_s: float, kind: int, inst: int, arg: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time_s, self.seq, kind, inst, arg))

    def loop(self) -> None:
        arrivals = [r.arrival_s for r in self.workload.trace.requests]
        horizon = math.inf if self.config.horizon_s is None else self.config.horizon_s
        if self.router.control_interval_s > 0:
            self.push(self.router.control_interval_s, _CONTROL, -1, 0)
        heap, i, total = self.heap, 0, len(arrivals)
        handlers = (
            self.on_prefill_done,
            self.on_prefill_free,
            self.on_transfer_done,
            self.on_step_end,
        )
        while True:
            next_arrival = arrivals[i] if i < total else math.inf
            if heap and heap[0][0] <= next_arrival:
                time_s, _, kind, inst, arg = heapq.heappop(heap)
                if time_s > horizon:
                    break
                self.now = time_s
                self.events += 1
                if kind == _CONTROL:
                    self.on_control(more=i < total)
                else:
                    handlers[kind](self.insts[inst], arg)
            elif i < total and next_arrival <= horizon:
                self.now = next_arrival
                self.events += 1
                self.on_arrival(i)
                i += 1
            else:
                break

    # --- routing ---------------------------------------------------------------------------

    def state(self, region: str | None = None) -> ClusterState:
        views = []
        for inst in self.insts:
            if inst.view is None:
                inst.view = inst.make_view(self.now)
            views.append(inst.view)
        return ClusterState(
            self.now, tuple(views), self.specs, self.config.link_gbps, self.config.seed, region
        )

    def on_arrival(self, r: int) -> None:
        request = self.workload.trace.requests[r]
        decision = self.router.route(request, self.state(self.region[r]))
        if isinstance(decision, Reject):
            self.drop(decision.reason)
            return
        d = self.checked(decision, request.model, self.region[r])
        if self.n_in[r] + self.n_out[r] > d.perf.kv_capacity_tokens:
            self.drop("prompt + output exceed the decode instance's KV capacity")
            return
        self.d_inst[r] = d.id
        if decision.prefill_instance is None:
            d.waiting.append((r, True))
            d.waiting_local_tokens += self.n_in[r]
            self.admit(d, wake=True)
            return
        p = self.insts[decision.prefill_instance]
        self.p_inst[r] = p.id
        d.expected += 1
        d.view = None
        p.queue.append(r)
        p.queued_tokens += self.n_in[r]
        p.view = None
        if not p.busy:
            self.start_prefill(p)

    def checked(self, route: Route, model: str, region: str | None) -> InstanceState:
        """The decode instance of a valid route; a router bug raises at once (wrong model,
        draining, wrong role, P and D in different regions, or outside the request's region)."""
        ids = [route.decode_instance]
        if route.prefill_instance is not None:
            ids.append(route.prefill_instance)
        for inst_id in ids:
            if not 0 <= inst_id < len(self.insts):
                raise ValueError(f"router chose instance {inst_id}, which does not exist")
            inst = self.insts[inst_id]
            if inst.perf.model != model or not inst.accepting:
                raise ValueError(f"router chose instance {inst_id}: wrong model or draining")
        d = self.insts[route.decode_instance]
        if d.role is Phase.PREFILL:
            raise ValueError(f"router chose prefill instance {d.id} to decode")
        p = route.prefill_instance
        if p is not None and self.insts[p].role is not Phase.PREFILL:
            raise ValueError(f"router chose non-prefill instance {p}")
        if p is not None and self.insts[p].region != d.region:
            raise ValueError(
                f"router paired prefill {p} ({self.insts[p].region}) with decode {d.id} "
                f"({d.region}): KV cache must not cross regions"
            )
        if region is not None and d.region != region:
            raise ValueError(f"router sent a request of region {region!r} to {d.region!r}")
        return d

    def drop(self, reason: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1

    # --- prefill instances -----------------------------------------------------------------

    def start_prefill(self, p: InstanceState) -> None:
        batch: list[int] = []
        tokens, budget = 0, p.perf.prefill_token_budget
        while p.queue and (not batch or tokens + self.n_in[p.queue[0]] <= budget):
            r = p.queue.popleft()
            self.started[r] = self.now
            batch.append(r)
            tokens += self.n_in[r]
        mean = tokens / len(batch)
        latency_s = p.perf.prefill_s(len(batch), mean)
        interval_s = p.perf.issue_interval_s(len(batch), mean)
        p.last_done_s = max(self.now + latency_s, p.last_done_s)
        p.inflight.append(batch)
        p.busy = True
        p.prefill_free_at_s = self.now + interval_s
        p.busy_s += interval_s
        p.view = None
        self.push(p.last_done_s, _PREFILL_DONE, p.id, 0)
        self.push(p.prefill_free_at_s, _PREFILL_FREE, p.id, 0)

    def on_prefill_free(self, p: InstanceState, _: int) -> None:
        p.busy = False
        p.view = None
        if p.queue:
            self.start_prefill(p)
        else:
            self.check_drain(p)

    def on_prefill_done(self, p: InstanceState, _: int) -> None:
        batch = p.inflight.popleft()
        touched: dict[int, InstanceState] = {}
        for r in batch:
            p.queued_tokens -= self.n_in[r]
            d = self.insts[self.d_inst[r]]
            d.expected -= 1
            if self.n_out[r] == 1:  # the prefill's token is the whole answer: nothing to move
                self.first[r] = self.finish[r] = self.now
            else:
                d.waiting.append((r, False))
            touched[d.id] = d
        p.view = None
        for d in touched.values():
            self.admit(d, wake=False)
            self.check_drain(d)
        self.check_drain(p)

    # --- decode / colocated instances ------------------------------------------------------

    def admit(self, d: InstanceState, wake: bool) -> None:
        """Admit waiting requests FIFO while a batch slot and KV space are free."""
        local_started = False
        cap, max_batch = d.perf.kv_capacity_tokens, d.perf.max_batch
        while d.waiting:
            r, local = d.waiting[0]
            need = self.n_in[r] + self.n_out[r]
            if d.slots >= max_batch or d.kv_reserved + need > cap:
                break
            d.waiting.popleft()
            d.slots += 1
            d.kv_reserved += need
            if local:
                self.started[r] = self.now
                d.waiting_local_tokens -= self.n_in[r]
                d.chunks.append([r, self.n_in[r]])
                d.chunk_tokens += self.n_in[r]
                local_started = True
            else:
                self.push(self.now + self.transfer_s(r), _TRANSFER_DONE, d.id, r)
        d.view = None
        if wake and local_started:
            self.wake(d)

    def transfer_s(self, r: int) -> float:
        p = self.insts[self.p_inst[r]]
        return self.n_in[r] * p.perf.kv_bytes_per_token * 8.0 / self.bits_per_s

    def on_transfer_done(self, d: InstanceState, r: int) -> None:
        self.first[r] = self.now
        d.joining.append(r)
        self.wake(d)

    def wake(self, d: InstanceState) -> None:
        """New work for `d`: a step boundary now if idle, else end the macro step early.

        An idle instance gets a zero-length step ending now, queued behind the events already
        due at this instant, so work arriving at the same moment starts in the same step.
        """
        if not d.busy:
            d.busy = True
            d.macro_t0, d.macro_c0, d.macro_k, d.macro_dt = self.now, d.counter, 0, 0.0
            d.end_counter = d.counter
            d.version += 1
            self.push(self.now, _STEP_END, d.id, d.version)
        elif d.macro_k > 1 and d.macro_dt > 0:
            # the boundary at or after now (a boundary within 1 ns of now counts as now)
            steps = max(math.ceil((self.now - d.macro_t0) / d.macro_dt - 1e-9), 0)
            end = d.macro_c0 + min(steps, d.macro_k)
            if end < d.end_counter:
                d.end_counter = end
                d.version += 1
                end_s = d.macro_t0 + (end - d.macro_c0) * d.macro_dt
                self.push(end_s, _STEP_END, d.id, d.version)

    def on_step_end(self, d: InstanceState, version: int) -> None:
        if version != d.version:
            return  # superseded by an earlier boundary
        d.busy = False
        d.busy_s += self.now - d.macro_t0
        d.counter = d.end_counter
        for r in d.step_chunks:
            self.first[r] = self.now
            if self.n_out[r] == 1:
                self.finish[r] = self.now
                d.slots -= 1
                d.kv_reserved -= self.n_in[r] + 1
            else:
                d.joining.append(r)
        d.step_chunks = []
        while d.finishing and d.finishing[0][0] <= d.counter:
            _, r = heapq.heappop(d.finishing)
            self.finish[r] = self.now
            d.leave(self.n_in[r], self.joined[r], self.n_in[r] + self.n_out[r])
        self.boundary(d)

    def boundary(self, d: InstanceState) -> None:
        """At a step boundary (d idle): join arrived requests, admit, start the next step."""
        for r in d.joining:
            self.joined[r] = d.counter
            d.join(r, self.n_in[r], self.n_out[r] - 1)
        d.joining.clear()
        self.admit(d, wake=False)
        self.start_step(d)
        d.view = None
        if not d.busy:
            self.check_drain(d)

    def start_step(self, d: InstanceState) -> None:
        if d.chunks:
            dt, k = self.chunk_step_s(d), 1
        elif d.n:
            k = d.finishing[0][0] - d.counter
            dt = d.perf.decode_step_s(d.n, d.mean_context((k - 1) / 2))
        else:
            return
        d.busy = True
        d.macro_t0, d.macro_c0, d.macro_k, d.macro_dt = self.now, d.counter, k, dt
        d.end_counter = d.counter + k
        d.version += 1
        self.push(self.now + k * dt, _STEP_END, d.id, d.version)

    def chunk_step_s(self, d: InstanceState) -> float:
        """Take the next prompt chunk(s) into this step; seconds the mixed step takes."""
        budget = max(d.perf.prefill_token_budget - d.n, 1)
        taken = 0
        while d.chunks and taken < budget:
            entry = d.chunks[0]
            take = min(entry[1], budget - taken)
            entry[1] -= take
            taken += take
            if entry[1] == 0:
                d.chunks.popleft()
                d.step_chunks.append(entry[0])
        d.chunk_tokens -= taken
        decode_s = d.perf.decode_step_s(d.n, d.mean_context()) if d.n else 0.0
        return decode_s + d.perf.prefill_s(1, float(taken))

    # --- role changes ----------------------------------------------------------------------

    def on_control(self, more: bool) -> None:
        for change in self.router.control(self.state()):
            self.request_role_change(change)
        if more or self.heap:
            self.push(self.now + self.router.control_interval_s, _CONTROL, -1, 0)

    def request_role_change(self, change: RoleChange) -> None:
        inst = self.insts[change.instance_id]
        if inst.pending_role is not None or change.to_role is inst.role:
            return
        inst.pending_role = change.to_role
        inst.pending_requested_s = self.now
        inst.accepting = False
        inst.view = None
        self.check_drain(inst)

    def check_drain(self, inst: InstanceState) -> None:
        if inst.pending_role is None or not inst.drained():
            return
        self.role_changes.append(
            RoleChangeRecord(
                inst.id, inst.role, inst.pending_role, inst.pending_requested_s, self.now
            )
        )
        inst.role = inst.pending_role
        inst.pending_role = None
        inst.accepting = True
        inst.view = None

    # --- results ---------------------------------------------------------------------------

    def result(self) -> SimResult:
        trace = self.workload.trace
        makespan_s = max(self.now, trace.duration_s)
        finished = [self.request_result(i) for i in range(len(trace.requests))]
        done = [f for f in finished if f is not None]
        per_model: dict[str, int] = {}
        for req in trace.requests:
            per_model[req.model] = per_model.get(req.model, 0) + 1
        totals = RunTotals(
            trace=trace.name,
            policy=str(self.router.policy),
            seed=self.config.seed,
            requests=len(trace.requests),
            drop_reasons=self.drops,
            trace_duration_s=trace.duration_s,
            simulated_s=makespan_s,
            events=self.events,
            perf_clamped_lookups=sum(c.clamp_count for c in self.counters.values())
            - self.clamps_before,
        )
        return aggregate(totals, done, self.usage(makespan_s), self.role_changes, per_model)

    def request_result(self, r: int) -> RequestResult | None:
        finish_s = self.finish[r]
        if math.isnan(finish_s):
            return None
        req = self.workload.trace.requests[r]
        spec = self.specs[req.model]
        ttft_s = self.first[r] - req.arrival_s
        tpot_s = (
            (finish_s - self.first[r]) / (req.output_tokens - 1) if req.output_tokens > 1 else 0.0
        )
        met = ttft_s <= spec.ttft_slo_s + 1e-12 and tpot_s <= spec.tpot_slo_s + 1e-12
        p = self.p_inst[r]
        return RequestResult(
            req.request_id,
            req.model,
            req.arrival_s,
            ttft_s,
            tpot_s,
            finish_s - req.arrival_s,
            p if p >= 0 else None,
            self.d_inst[r],
            met,
            self.insts[self.d_inst[r]].region,
            self.started[r] - req.arrival_s if not math.isnan(self.started[r]) else 0.0,
        )

    def usage(self, makespan_s: float) -> list[InstanceUsage]:
        return [
            InstanceUsage(
                i.id,
                i.perf.name,
                i.role,
                i.busy_s,
                i.busy_s / makespan_s if makespan_s else 0.0,
                i.perf.gpus,
                i.perf.usd_per_hr,
                i.perf.model,
                i.region,
            )
            for i in self.insts
        ]
