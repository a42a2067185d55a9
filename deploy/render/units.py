"""Deployment units: what a target needs to start one vLLM engine or one FluidPD router.

Values are frozen; `to_dict` is the JSON stored in `deployment_units.spec` and written by the
dry-run target, `engine_from_dict`/`router_from_dict` read it back (the diff compares them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from planning.domain import Phase

# Placeholder a target replaces with the address peers reach this machine at (pod IP, the
# instance's private IP, 127.0.0.1 locally): the NIXL side channel must advertise it.
HOST_IP_PLACEHOLDER = "${HOST_IP}"


@dataclass(frozen=True, slots=True)
class StageMachine:
    """One pipeline stage: `tp` GPUs of `gpu_type` on one `instance_type` machine."""

    stage_index: int
    gpu_type: str
    tp: int
    num_layers: int
    instance_type: str
    machine_gpu_count: int  # GPUs the machine has; tp <= this


@dataclass(frozen=True, slots=True)
class EngineUnit:
    """One vLLM serving instance: `vllm serve MODEL *args` with `env`, on `stages` machines.

    `multi_machine` pipelines run one machine per stage (Ray executor, stage 0 on the leader);
    otherwise every stage shares one machine and `gpus_per_machine` is the sum of the TPs.
    """

    unit_id: str
    model: str
    cloud: str
    region: str
    pricing: str
    role: Phase
    template_id: str
    kv_role: str | None
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    stages: tuple[StageMachine, ...]
    multi_machine: bool
    http_port: int

    @property
    def command(self) -> tuple[str, ...]:
        return ("vllm", "serve", self.model, *self.args)

    @property
    def machines(self) -> tuple[tuple[str, int], ...]:
        """(instance type, GPUs requested) per machine, leader first."""
        if self.multi_machine:
            return tuple((s.instance_type, s.tp) for s in self.stages)
        return ((self.stages[0].instance_type, sum(s.tp for s in self.stages)),)

    @property
    def flippable(self) -> bool:
        """The router can flip it between prefill and decode in place (kv_both, one stage)."""
        return self.kv_role == "kv_both" and len(self.stages) == 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "engine",
            "unit_id": self.unit_id,
            "model": self.model,
            "cloud": self.cloud,
            "region": self.region,
            "pricing": self.pricing,
            "role": str(self.role),
            "template_id": self.template_id,
            "kv_role": self.kv_role,
            "command": list(self.command),
            "env": dict(self.env),
            "stages": [_stage_dict(s) for s in self.stages],
            "multi_machine": self.multi_machine,
            "http_port": self.http_port,
        }


@dataclass(frozen=True, slots=True)
class RouterInstance:
    unit_id: str
    name: str  # router instance id and host name (k8s Service) of the engine
    role: Phase
    kv_role: str | None
    http_port: int
    perf: tuple[tuple[str, float], ...]  # this instance's LinearStepModel overrides


@dataclass(frozen=True, slots=True)
class RouterUnit:
    """One FluidPD router per model and region, fronting that group's P/D engines.

    `config()` is the document `deploy.router.config.RouterConfig` validates; engine URLs use
    each instance's `name` as host unless the target passes the addresses it assigned.
    """

    unit_id: str
    model: str
    cloud: str
    region: str
    http_port: int
    ttft_slo_s: float
    tpot_slo_s: float
    instances: tuple[RouterInstance, ...]
    perf: tuple[tuple[str, float], ...]  # LinearStepModel fields shared by the instances
    fluidpd: tuple[tuple[str, Any], ...]  # FluidPDParams.to_dict() items, sorted

    def config(self, hosts: dict[str, str] | None = None) -> dict[str, Any]:
        """The router config; `hosts` maps unit id → host:port the target gave the engine."""
        where = hosts or {}
        return {
            "listen_host": "0.0.0.0",
            "listen_port": self.http_port,
            "model": self.model,
            "engine": "vllm",
            "ttft_slo_s": self.ttft_slo_s,
            "tpot_slo_s": self.tpot_slo_s,
            "instances": [
                {
                    "id": i.name,
                    "url": f"http://{where.get(i.unit_id, f'{i.name}:{i.http_port}')}",
                    "role": str(i.role),
                    **({"perf": dict(i.perf)} if i.perf else {}),
                }
                for i in self.instances
            ],
            "perf": dict(self.perf),
            "fluidpd": dict(self.fluidpd),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "router",
            "unit_id": self.unit_id,
            "model": self.model,
            "cloud": self.cloud,
            "region": self.region,
            "port": self.http_port,
            "slo": {"ttft_s": self.ttft_slo_s, "tpot_s": self.tpot_slo_s},
            "instances": [
                {
                    "unit_id": i.unit_id,
                    "name": i.name,
                    "role": str(i.role),
                    "kv_role": i.kv_role,
                    "port": i.http_port,
                    "perf": dict(i.perf),
                }
                for i in self.instances
            ],
            "perf": dict(self.perf),
            "fluidpd": dict(self.fluidpd),
        }


@dataclass(frozen=True, slots=True)
class DeploymentSpec:
    plan_id: str
    engines: tuple[EngineUnit, ...]
    routers: tuple[RouterUnit, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "engines": [e.to_dict() for e in self.engines],
            "routers": [r.to_dict() for r in self.routers],
        }


def _stage_dict(stage: StageMachine) -> dict[str, Any]:
    return {
        "stage_index": stage.stage_index,
        "gpu_type": stage.gpu_type,
        "tp": stage.tp,
        "num_layers": stage.num_layers,
        "instance_type": stage.instance_type,
        "machine_gpu_count": stage.machine_gpu_count,
    }


def engine_from_dict(data: dict[str, Any]) -> EngineUnit:
    command = data["command"]
    return EngineUnit(
        unit_id=data["unit_id"],
        model=data["model"],
        cloud=data["cloud"],
        region=data["region"],
        pricing=data["pricing"],
        role=Phase(data["role"]),
        template_id=data["template_id"],
        kv_role=data["kv_role"],
        args=tuple(command[3:]),
        env=tuple(sorted(data["env"].items())),
        stages=tuple(StageMachine(**s) for s in data["stages"]),
        multi_machine=data["multi_machine"],
        http_port=data["http_port"],
    )


def router_from_dict(data: dict[str, Any]) -> RouterUnit:
    return RouterUnit(
        unit_id=data["unit_id"],
        model=data["model"],
        cloud=data["cloud"],
        region=data["region"],
        http_port=data["port"],
        ttft_slo_s=data["slo"]["ttft_s"],
        tpot_slo_s=data["slo"]["tpot_s"],
        instances=tuple(
            RouterInstance(
                i["unit_id"],
                i["name"],
                Phase(i["role"]),
                i["kv_role"],
                i["port"],
                tuple(sorted(i["perf"].items())),
            )
            for i in data["instances"]
        ),
        perf=tuple(sorted(data["perf"].items())),
        fluidpd=tuple(sorted(data["fluidpd"].items())),
    )


def spec_hash(data: dict[str, Any]) -> str:
    """Short stable hash of a unit's JSON: names a unit's incarnation in a target."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def unit_name(unit_id: str, max_len: int = 52) -> str:
    """DNS-label-safe name of a unit (k8s object and Service names, router instance ids, EC2
    Name tags, file names): a readable prefix plus a hash of the full id, so distinct ids never
    collide after truncation."""
    out = "".join(c if c.isalnum() else "-" for c in unit_id.lower())
    while "--" in out:
        out = out.replace("--", "-")
    digest = hashlib.sha256(unit_id.encode()).hexdigest()[:6]
    return f"{out.strip('-')[: max_len - 7].strip('-')}-{digest}"
