"""The deploy target protocol, its registry and the router admin client targets share.

A target turns units into running things and back. Every method that touches the world goes
through a client the caller injects (boto3 EC2 client, manifest writer, process launcher,
router admin), so tests run against moto, files and local processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import httpx

from deploy.render.units import DeploymentSpec, EngineUnit, RouterUnit

Unit = EngineUnit | RouterUnit


class TargetName(StrEnum):
    KUBERNETES = "kubernetes"
    EC2 = "ec2"
    LOCAL = "local"
    DRY_RUN = "dry-run"


class TargetCannotProvideError(ValueError):
    """The target cannot run something the plan needs (an instance type, a cloud, GPUs)."""


class DeployTarget(Protocol):
    name: TargetName
    reachable: bool  # whether /health of its units can be polled from the rollout host

    def bind(self, plan_id: str, deployment_id: str) -> None:
        """The rollout this target now applies (tags, labels)."""

    def check(self, spec: DeploymentSpec) -> None:
        """Raise TargetCannotProvideError before anything is applied."""

    def write_files(self, spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
        """Write the target's rendered artefacts (manifests, user data, configs)."""

    def find(self, unit: Unit) -> str | None:
        """The id of this unit's incarnation if it already exists (makes create idempotent)."""

    def create(self, unit: Unit, hosts: dict[str, str]) -> str:
        """Start the unit; `hosts` maps engine unit id → host:port (router configs). Returns
        the target's id for it."""

    def address(self, unit: Unit, external_id: str) -> str | None:
        """host:port of a running unit, None when it cannot be reached from here."""

    def update_router(self, router: RouterUnit, external_id: str, hosts: dict[str, str]) -> None:
        """Give a running router its new config: FluidPD parameters and instance set in place
        through its admin API (local, ec2), or a new ConfigMap and a restart (kubernetes)."""

    def flip_role(self, router: RouterUnit, router_id: str, unit: EngineUnit) -> None:
        """Ask the router to move a running engine to `unit.role` (drains the old role)."""

    def drain(self, unit: Unit, external_id: str) -> None:
        """Stop new work reaching the unit and let in-flight work finish."""

    def delete(self, unit: Unit, external_id: str) -> None: ...


class RouterAdmin(Protocol):
    """The live router's admin API (`deploy.router.app`): parameters, roles and the instance
    set, all in place."""

    def put_params(self, router_url: str, params: dict[str, Any]) -> None: ...

    def set_role(self, router_url: str, instance: str, role: str) -> None: ...

    def put_instances(self, router_url: str, instances: list[dict[str, Any]]) -> None:
        """Replace the router's instances (`InstanceConfig` dicts): removed ones drain."""
        ...


def push_router_config(admin: RouterAdmin, router_url: str, config: dict[str, Any]) -> None:
    """Bring a running router to `config` (a `RouterUnit.config` document) in place: FluidPD
    parameters first, then the instance set (new engines take work, removed ones drain)."""
    admin.put_params(router_url, dict(config["fluidpd"]))
    admin.put_instances(router_url, list(config["instances"]))


@dataclass
class HttpRouterAdmin:
    """`PUT /admin/params`, `POST /admin/roles` and `PUT /admin/instances` of
    `deploy.router.app` (bearer `token` when the router has one, else it must be loopback)."""

    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0))
    token: str | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def put_params(self, router_url: str, params: dict[str, Any]) -> None:
        r = self.client.put(f"{router_url}/admin/params", json=params, headers=self._headers())
        r.raise_for_status()

    def set_role(self, router_url: str, instance: str, role: str) -> None:
        body = {"instance": instance, "role": role}
        r = self.client.post(f"{router_url}/admin/roles", json=body, headers=self._headers())
        r.raise_for_status()

    def put_instances(self, router_url: str, instances: list[dict[str, Any]]) -> None:
        body = {"instances": instances}
        r = self.client.put(f"{router_url}/admin/instances", json=body, headers=self._headers())
        r.raise_for_status()


@dataclass
class RecordingRouterAdmin:
    """Writes admin calls to a list (dry-run, manifests-only kubernetes, tests)."""

    calls: list[tuple[str, str, Any]] = field(default_factory=list)

    def put_params(self, router_url: str, params: dict[str, Any]) -> None:
        self.calls.append(("put_params", router_url, params))

    def set_role(self, router_url: str, instance: str, role: str) -> None:
        self.calls.append(("set_role", router_url, (instance, role)))

    def put_instances(self, router_url: str, instances: list[dict[str, Any]]) -> None:
        self.calls.append(("put_instances", router_url, instances))


TargetFactory = Callable[..., DeployTarget]
_REGISTRY: dict[TargetName, TargetFactory] = {}


def register_target(name: TargetName) -> Callable[[TargetFactory], TargetFactory]:
    def wrap(factory: TargetFactory) -> TargetFactory:
        _REGISTRY[name] = factory
        return factory

    return wrap


def make_target(name: TargetName | str, **clients: Any) -> DeployTarget:
    """Build a registered target; `clients` are its constructor's injected dependencies."""
    import deploy.targets.dryrun_target
    import deploy.targets.ec2_target
    import deploy.targets.kubernetes_target
    import deploy.targets.local_target  # noqa: F401  (each registers itself)

    return _REGISTRY[TargetName(name)](**clients)
