"""The router's config file (JSON or YAML), validated by pydantic, converted at once to core values.

Example (YAML):

    listen_host: 127.0.0.1
    listen_port: 8000
    model: meta-llama/Llama-3.1-8B-Instruct
    engine: vllm
    ttft_slo_s: 1.0
    tpot_slo_s: 0.05
    instances:
      - {id: p0, url: http://10.0.0.5:8100, role: prefill}
      - {id: d0, url: http://10.0.0.6:8200, role: decode}
      # or a colocated-only pool: every instance `role: colocated` (plain vLLM replicas)
    perf: {prefill_fixed_s: 0.01, prefill_s_per_token: 0.00005, decode_fixed_s: 0.01,
           decode_s_per_seq: 0.0001, decode_s_per_context_token: 0.0, kv_transfer_s_per_token: 0.0,
           kv_capacity_tokens: 400000}
    fluidpd: {role_window_s: 5.0}     # FluidPD elasticity parameters; omitted ones take defaults

The upstreams are exactly `instances` (replaced at runtime only through the admin API,
`PUT /admin/instances`, with the same `InstanceConfig` schema): the router never forwards
anywhere else.

A pool is either P/D (>= 1 prefill and >= 1 decode instance, no colocated ones: FluidPD routes)
or colocated-only (every request whole on the least-loaded instance; no FluidPD).
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator, model_validator

from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.fluidpd_router import WorkerRole
from planning.routing.pressure import LinearStepModel


class EngineKind(StrEnum):
    VLLM = "vllm"


class InstanceRole(StrEnum):
    """What the router sends an instance: P/D legs (FluidPD) or whole requests (colocated)."""

    PREFILL = "prefill"
    DECODE = "decode"
    COLOCATED = "colocated"


class InstanceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    url: HttpUrl
    role: InstanceRole
    perf: dict[str, float] | None = Field(None, description="overrides the deployment's perf")


class RouterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    listen_host: str = "127.0.0.1"
    listen_port: int = Field(8000, ge=0, le=65535)
    model: str | None = None
    engine: EngineKind = EngineKind.VLLM
    ttft_slo_s: float = Field(gt=0)
    tpot_slo_s: float = Field(gt=0)
    instances: list[InstanceConfig] = Field(min_length=1)
    perf: dict[str, float] = Field(description="LinearStepModel fields of one instance")
    fluidpd: dict[str, Any] = Field(default_factory=dict)
    admin_token: str | None = Field(
        None, description="bearer token for /admin; None allows loopback clients only"
    )
    connect_timeout_s: float = Field(2.0, gt=0)
    prefill_timeout_s: float = Field(60.0, gt=0)
    decode_timeout_s: float = Field(600.0, gt=0)
    max_attempts: int = Field(3, ge=1, description="instances tried per call before giving up")
    unhealthy_cooldown_s: float = Field(5.0, ge=0)
    scrape_interval_s: float = Field(1.0, gt=0)
    control_interval_s: float = Field(0.25, gt=0)
    expected_output_tokens: int = Field(256, ge=1, description="when a request sets no max")

    @field_validator("fluidpd")
    @classmethod
    def _params_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        FluidPDParams.from_dict(value)
        return value

    @field_validator("perf")
    @classmethod
    def _perf_valid(cls, value: dict[str, float]) -> dict[str, float]:
        linear_model(value)
        return value

    @model_validator(mode="after")
    def _valid_pool(self) -> RouterConfig:
        check_pool(self.instances, [i.role for i in self.instances])
        return self

    def params(self) -> FluidPDParams:
        return FluidPDParams.from_dict(self.fluidpd)

    def instance_perf(self, instance: InstanceConfig) -> LinearStepModel:
        return linear_model({**self.perf, **(instance.perf or {})})


class InstancesUpdate(BaseModel):
    """Body of `PUT /admin/instances`: the complete new instance set."""

    model_config = ConfigDict(extra="forbid")

    instances: list[InstanceConfig] = Field(min_length=1)


def check_pool(instances: list[InstanceConfig], roles: list[InstanceRole]) -> None:
    """Raise ValueError unless `instances` (serving `roles`, same order) form a valid pool:
    unique ids, and either colocated-only or >= 1 prefill and >= 1 decode."""
    ids = [i.id for i in instances]
    if len(set(ids)) != len(ids):
        raise ValueError("instance ids must be unique")
    kinds = set(roles)
    if kinds == {InstanceRole.COLOCATED}:
        return
    if InstanceRole.COLOCATED in kinds:
        raise ValueError("a pool is either colocated-only or P/D; it cannot mix them")
    if kinds != {InstanceRole.PREFILL, InstanceRole.DECODE}:
        raise ValueError("a P/D pool needs at least one prefill and one decode instance")


def worker_role(role: InstanceRole) -> WorkerRole | None:
    """The FluidPD role of a P/D instance; None for a colocated one."""
    return None if role is InstanceRole.COLOCATED else WorkerRole(role.value)


def linear_model(values: dict[str, float]) -> LinearStepModel:
    """A `LinearStepModel` from a config dict; missing or unknown fields raise ValueError."""
    known = set(LinearStepModel.__dataclass_fields__)
    missing, unknown = known - set(values), set(values) - known
    if missing or unknown:
        raise ValueError(f"perf: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return LinearStepModel(
        prefill_fixed_s=float(values["prefill_fixed_s"]),
        prefill_s_per_token=float(values["prefill_s_per_token"]),
        decode_fixed_s=float(values["decode_fixed_s"]),
        decode_s_per_seq=float(values["decode_s_per_seq"]),
        decode_s_per_context_token=float(values["decode_s_per_context_token"]),
        kv_transfer_s_per_token=float(values["kv_transfer_s_per_token"]),
        kv_capacity_tokens=int(values["kv_capacity_tokens"]),
    )


def load_config(path: Path) -> RouterConfig:
    """Read and validate a router config from a .json, .yaml or .yml file."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return RouterConfig.model_validate(data)
