"""Kubernetes target: renders validated YAML and applies it through an injected client.

The bundled client writes manifests to a directory (apply with `kubectl apply -f DIR`);
a live-cluster client implements the same three methods.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import yaml

from deploy.render.units import DeploymentSpec, EngineUnit, RouterUnit, spec_hash, unit_name
from deploy.targets.base_target import (
    RecordingRouterAdmin,
    RouterAdmin,
    TargetCannotProvideError,
    TargetName,
    Unit,
    register_target,
)
from deploy.targets.kubernetes_objects import (
    InvalidObjectError,
    KubeOptions,
    engine_object_name,
    engine_objects,
    router_objects,
    validate_object,
)


class KubeClient(Protocol):
    def apply(self, obj: dict[str, Any]) -> None: ...

    def delete(self, kind: str, name: str) -> None: ...

    def exists(self, kind: str, name: str) -> bool: ...


class ManifestDirClient:
    """'Applies' by writing `<dir>/<Kind>-<name>.yaml`; delete removes the file."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, kind: str, name: str) -> Path:
        return self.directory / f"{kind}-{name}.yaml"

    def apply(self, obj: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(obj["kind"], obj["metadata"]["name"])
        path.write_text(yaml.safe_dump(obj, sort_keys=True), encoding="utf-8")

    def delete(self, kind: str, name: str) -> None:
        self._path(kind, name).unlink(missing_ok=True)

    def exists(self, kind: str, name: str) -> bool:
        return self._path(kind, name).exists()


def render_manifests(spec: DeploymentSpec, opts: KubeOptions) -> list[dict[str, Any]]:
    """Every object of the deployment, validated (raises TargetCannotProvideError)."""
    objects: list[dict[str, Any]] = []
    try:
        for engine in spec.engines:
            objects += engine_objects(engine, spec_hash(engine.to_dict()), opts)
        for router in spec.routers:
            objects += router_objects(router, _service_hosts(spec.engines), opts)
        for obj in objects:
            validate_object(obj)
    except InvalidObjectError as error:
        raise TargetCannotProvideError(f"kubernetes: {error}") from error
    return objects


def _service_hosts(engines: Iterable[EngineUnit]) -> dict[str, str]:
    return {
        e.unit_id: f"{engine_object_name(e, spec_hash(e.to_dict()))}:{e.http_port}" for e in engines
    }


class KubernetesTarget:
    name = TargetName.KUBERNETES
    reachable = False  # cluster addresses are not reachable from the rollout host

    def __init__(
        self,
        client: KubeClient,
        options: KubeOptions | None = None,
        router_admin: RouterAdmin | None = None,
        node_instance_types: frozenset[str] | None = None,
    ) -> None:
        self.client = client
        self.opts = options or KubeOptions()
        self.router_admin = router_admin or RecordingRouterAdmin()
        self.node_instance_types = node_instance_types

    def bind(self, plan_id: str, deployment_id: str) -> None:
        self.plan_id, self.deployment_id = plan_id, deployment_id

    def check(self, spec: DeploymentSpec) -> None:
        """Every machine type must be a node type of the cluster (when known); objects valid."""
        if self.node_instance_types is not None:
            for engine in spec.engines:
                missing = {t for t, _ in engine.machines} - self.node_instance_types
                if missing:
                    raise TargetCannotProvideError(
                        f"kubernetes: no nodes of instance type {sorted(missing)} for "
                        f"{engine.unit_id}"
                    )
        render_manifests(spec, self.opts)

    def write_files(self, spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
        path = out_dir / "kubernetes.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        docs = render_manifests(spec, self.opts)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=True), encoding="utf-8")
        return (path,)

    def _objects(self, unit: Unit, hosts: dict[str, str]) -> list[dict[str, Any]]:
        if isinstance(unit, EngineUnit):
            return engine_objects(unit, spec_hash(unit.to_dict()), self.opts)
        return router_objects(unit, hosts, self.opts)

    def _name(self, unit: Unit) -> str:
        if isinstance(unit, EngineUnit):
            return engine_object_name(unit, spec_hash(unit.to_dict()))
        return unit_name(unit.unit_id)

    def find(self, unit: Unit) -> str | None:
        objects = self._objects(unit, {})
        kind, name = objects[0]["kind"], objects[0]["metadata"]["name"]
        return f"{kind}/{name}" if self.client.exists(kind, name) else None

    def create(self, unit: Unit, hosts: dict[str, str]) -> str:
        objects = self._objects(unit, hosts)
        for obj in objects:
            validate_object(obj)
            self.client.apply(obj)
        return f"{objects[0]['kind']}/{objects[0]['metadata']['name']}"

    def address(self, unit: Unit, external_id: str) -> str | None:
        """The Service's cluster DNS name (peers use it; readiness probes gate the pods)."""
        return f"{external_id.split('/', 1)[1]}:{unit.http_port}"

    def update_router(self, router: RouterUnit, external_id: str, hosts: dict[str, str]) -> None:
        for obj in router_objects(router, hosts, self.opts):
            self.client.apply(obj)

    def flip_role(self, router: RouterUnit, router_id: str, unit: EngineUnit) -> None:
        url = f"http://{unit_name(router.unit_id)}.{self.opts.namespace}:{router.http_port}"
        self.router_admin.set_role(url, unit_name(unit.unit_id), str(unit.role))

    def drain(self, unit: Unit, external_id: str) -> None:
        """The router no longer lists the unit (update_router ran first); the pods' graceful
        termination lets in-flight requests finish."""

    def delete(self, unit: Unit, external_id: str) -> None:
        """Delete by the recorded id (a flipped engine keeps the objects it started with)."""
        kind, name = external_id.split("/", 1)
        self.client.delete(kind, name)
        self.client.delete("Service", name)
        if isinstance(unit, RouterUnit):
            self.client.delete("ConfigMap", name)


@register_target(TargetName.KUBERNETES)
def _make(out_dir: Path, kube_client: KubeClient | None = None, **kwargs: Any) -> KubernetesTarget:
    return KubernetesTarget(
        kube_client or ManifestDirClient(Path(out_dir) / "k8s-applied"), **kwargs
    )
