"""The router plug-in contract: a snapshot of the serving instances in, decisions out.

The same router object runs in the simulator (`planning.simulator`) and in the live router
(deploy side), so it must not know which one drives it. The contract:

1. **Creation.** `make_router(policy, **params)` (in `planning.routing`) returns a fresh router
   for one run. A router may keep private history (e.g. FluidRole's pressure window), but its
   outputs must be a deterministic function of the calls it has received: no clocks, no global
   random state, no IO. Seeded randomness comes from `ClusterState.seed`.

2. **Per request: `route(request, state) -> Route | Reject`.** Called once when a request
   arrives. `state.instances` holds every instance (index == `instance_id`); a router only
   picks instances of `request.model` whose `accepting` is True and whose role fits:
   - (a) P/D split: `Route(decode_instance=d, prefill_instance=p)` with `p` in role PREFILL and
     `d` in role DECODE. The prompt is prefilled on `p` (batched under its token budget), the
     KV cache moves to `d` over the link (`kv_transfer_s`), and `d` generates the rest.
     The first token comes out of `p`: TTFT = prefill queue + prefill + transfer.
   - (b) one instance does both: `Route(decode_instance=d, prefill_instance=None)`. `d` runs the
     prompt locally as chunked prefill interleaved with its decode steps (vLLM colocated
     serving; FluidToken on a DECODE instance; the only choice for role COLOCATED).
   - `Reject(reason)` drops the request (counted as dropped, never silently lost).

3. **Periodic control: `control(state) -> tuple[RoleChange, ...]`.** Called every
   `control_interval_s` seconds of (simulated or wall) time when that is > 0. (c) A
   `RoleChange(instance_id, to_role)` asks for a FluidRole flip: the driver at once stops
   routing new work of the old role to it (`accepting` becomes False, `pending_role` set), lets
   queued and in-flight work drain, then switches the role (no reload). Changes to an instance
   already draining, or to its current role, are ignored.

4. **What a router may read** (d): per instance, `InstanceView`: role, queued prompt tokens
   (waiting + in the running prefill batch or chunk queue), nominal prefill throughput, the
   running decode batch and its mean context, KV tokens reserved and capacity, the predicted
   decode step time at the current batch, and `perf` — the instance's perf model
   (`InstancePerf`: prefill latency(batch, tokens), decode step(batch, context), KV bytes per
   token, limits) for what-if questions such as FluidToken's largest prefill chunk that keeps the
   step under the TPOT SLO. Helpers below give the predicted TTFT/TPOT that FluidPD's pressure
   indicators use. Per-model SLOs come in `state.specs`.

5. **Regions** (e): every instance has a `region` (and `cloud`). The KV cache never crosses
   regions (DESIGN.md: P and D of one request live in the same region), so a P/D route pairs a
   prefill and a decode instance of one region; the driver rejects a route that does not (a
   router bug). In `route` calls, `state.region` is the region the request arrived in (the
   simulator splits each model's requests over regions by the plan's per-region demand); the
   router serves it there. `state.region is None` means any region (one pool per region, still
   never mixed). Control ticks see `state.region is None` and reason per region's pool.

Values are frozen; routers never mutate the state they are given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from planning.domain import Phase
from planning.routing.instance_perf import InstancePerf
from planning.workload import ModelSpec, Request

# Network between a prefill and a decode machine, per direction. Default: 400 Gb/s, one
# NVIDIA ConnectX-7 NDR port (one per GPU on p5.48xlarge: 3,200 Gb/s EFA over 8 GPUs, AWS
# instance page; H100 DGX: 8x ConnectX-7 400 Gb/s, NVIDIA DGX H100 datasheet).
DEFAULT_LINK_GBPS = 400.0


class RouterPolicy(StrEnum):
    """Registered routing policies (`planning.routing.make_router`)."""

    STATIC = "static"  # fixed roles, least-loaded (or round-robin) choice
    FLUIDTOKEN = "fluidtoken"  # FluidPD issue: bounded local prefill on decode workers
    FLUIDROLE = "fluidrole"  # FluidPD issue: role flips under sustained imbalance
    FLUIDPD = "fluidpd"  # both


@dataclass(frozen=True, slots=True)
class InstanceView:
    """One instance as the router sees it at `ClusterState.now_s`."""

    instance_id: int
    model: str
    role: Phase
    accepting: bool  # False while draining for a role change
    pending_role: Phase | None  # the role it switches to once drained
    queued_prompt_tokens: int  # prompt tokens not yet prefilled here (waiting + running)
    prefill_tokens_per_s: float  # nominal prefill throughput (perf.prefill_tokens_per_s)
    prefill_busy_until_s: float  # when its current prefill batch frees the (first) stage
    decode_batch: int  # requests in the running decode batch
    decode_waiting: int  # requests here waiting for KV space / a batch slot
    mean_context_tokens: float  # mean context of the running decode batch (0 if empty)
    kv_used_tokens: int  # KV tokens reserved by running + admitted requests
    kv_capacity_tokens: int
    step_time_s: float  # predicted decode step at the current batch (0 if empty)
    perf: InstancePerf
    region: str = ""  # where it runs; P and D of one request share it
    cloud: str = ""

    @property
    def kv_usage(self) -> float:
        """Fraction of KV capacity reserved, 0..1 (vLLM `kv_cache_usage_perc` / 100)."""
        return self.kv_used_tokens / self.kv_capacity_tokens if self.kv_capacity_tokens else 1.0

    def predicted_prefill_wait_s(self, now_s: float) -> float:
        """Seconds until a prompt arriving now finishes prefill here, ignoring its own length:
        queued tokens over nominal throughput (never negative; inf if it cannot prefill)."""
        if self.prefill_tokens_per_s <= 0:
            return math.inf
        backlog_s = self.queued_prompt_tokens / self.prefill_tokens_per_s
        return max(backlog_s, self.prefill_busy_until_s - now_s, 0.0)

    def predicted_step_s(self, extra_requests: int = 0) -> float:
        """Decode step time with `extra_requests` more in the batch (perf model)."""
        batch = self.decode_batch + extra_requests
        if batch <= 0:
            return 0.0
        context = self.mean_context_tokens if self.decode_batch else 1.0
        return self.perf.decode_step_s(batch, max(context, 1.0))


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Everything a router may look at when it decides."""

    now_s: float
    instances: tuple[InstanceView, ...]
    specs: Mapping[str, ModelSpec]
    link_gbps: float = DEFAULT_LINK_GBPS
    seed: int = 0
    region: str | None = None  # in `route`: the region the request arrived in (None: any)

    def of_model(self, model: str, region: str | None = None) -> tuple[InstanceView, ...]:
        """Instances of `model`, only those in `region` when it is given."""
        return tuple(
            v for v in self.instances if v.model == model and (region is None or v.region == region)
        )

    def regions_of(self, model: str) -> tuple[str, ...]:
        """Regions holding instances of `model`, sorted."""
        return tuple(sorted({v.region for v in self.instances if v.model == model}))

    def kv_transfer_s(self, prefill: InstanceView, tokens: int) -> float:
        """Seconds to move `tokens` tokens of KV cache from `prefill` over the P->D link."""
        return tokens * prefill.perf.kv_bytes_per_token * 8.0 / (self.link_gbps * 1e9)


@dataclass(frozen=True, slots=True)
class Route:
    """Send the request to `decode_instance`; prefill it on `prefill_instance` first, or
    locally (chunked prefill) when that is None."""

    decode_instance: int
    prefill_instance: int | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Drop the request; the reason lands in the run's drop counts."""

    reason: str


@dataclass(frozen=True, slots=True)
class RoleChange:
    """Flip `instance_id` to `to_role` after it drains its current work."""

    instance_id: int
    to_role: Phase


class Router(Protocol):
    """A routing / elasticity policy (see the module docstring for the contract)."""

    @property
    def policy(self) -> RouterPolicy: ...

    @property
    def control_interval_s(self) -> float:
        """Seconds between `control` calls; 0 means never."""
        ...

    def route(self, request: Request, state: ClusterState) -> Route | Reject: ...

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]: ...
