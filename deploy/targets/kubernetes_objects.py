"""Kubernetes objects of a deployment (pure dicts) and their schema check.

One workload per engine: a Deployment when the engine fits one node, a LeaderWorkerSet
(`leaderworkerset.x-k8s.io/v1`) when its pipeline spans nodes (Ray head on the leader = stage
0, Ray workers join it). Pods select nodes by `node.kubernetes.io/instance-type` and request
`nvidia.com/gpu`. Each engine gets a Service (the router's upstream); each router a ConfigMap
(its config), a Deployment and a Service. `validate_object` checks core objects against the
official `kubernetes` client models and LeaderWorkerSet's pod templates likewise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient

from deploy.render.units import HOST_IP_PLACEHOLDER, EngineUnit, RouterUnit, unit_name

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_RESOURCE = "nvidia.com/gpu"
RAY_PORT = 6379


class InvalidObjectError(ValueError):
    """A rendered object does not match the Kubernetes schema."""


@dataclass(frozen=True, slots=True)
class KubeOptions:
    namespace: str = "coral"
    vllm_image: str = "vllm/vllm-openai:v0.27.1"
    router_image: str = "coral-router:latest"
    shm_size: str = "16Gi"


def engine_object_name(unit: EngineUnit, incarnation: str) -> str:
    return f"{unit_name(unit.unit_id)}-{incarnation}"


def _labels(unit: EngineUnit | RouterUnit, name: str) -> dict[str, str]:
    role = str(unit.role) if isinstance(unit, EngineUnit) else "router"
    return {"app.kubernetes.io/part-of": "coral", "coral/unit": name, "coral/role": role}


def _env(unit: EngineUnit) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    for key, value in unit.env:
        if value == HOST_IP_PLACEHOLDER:
            env.append({"name": key, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        else:
            env.append({"name": key, "value": value})
    return env


def _pod_spec(
    unit: EngineUnit, instance_type: str, gpus: int, command: list[str], opts: KubeOptions
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "vllm",
        "image": opts.vllm_image,
        "command": ["/bin/sh", "-c"],
        "args": [" ".join(command)],
        "env": _env(unit),
        "ports": [{"containerPort": unit.http_port, "name": "http"}],
        "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    return {
        "nodeSelector": {INSTANCE_TYPE_LABEL: instance_type},
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": opts.shm_size}}],
    }


def _shell(args: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"'{a}'" if any(c in a for c in ' {}"$,') else a for a in args)


def engine_workload(unit: EngineUnit, name: str, opts: KubeOptions) -> dict[str, Any]:
    """A Deployment (one node) or a LeaderWorkerSet (a pipeline over nodes) for one engine."""
    labels = _labels(unit, name)
    meta = {"name": name, "namespace": opts.namespace, "labels": labels}
    serve = ["exec", _shell(list(unit.command))]
    if not unit.multi_machine:
        ((itype, gpus),) = unit.machines
        pod = _pod_spec(unit, itype, gpus, serve, opts)
        pod["containers"][0]["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": unit.http_port}, "periodSeconds": 10,
        }  # fmt: skip
        return {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}},
        }  # fmt: skip
    return _leader_worker_set(unit, name, meta, labels, serve, opts)


def _leader_worker_set(
    unit: EngineUnit,
    name: str,
    meta: dict[str, Any],
    labels: dict[str, str],
    serve: list[str],
    opts: KubeOptions,
) -> dict[str, Any]:
    worker_types = {t for t, _ in unit.machines[1:]}
    if len(worker_types) != 1:
        raise InvalidObjectError(
            f"{unit.unit_id}: a LeaderWorkerSet has one worker template, but stages 1.. use "
            f"instance types {sorted(worker_types)}"
        )
    (lead_type, lead_gpus), (work_type, work_gpus) = unit.machines[0], unit.machines[1]
    head = ["ray", "start", "--head", f"--port={RAY_PORT}", "&&", *serve]
    join = ["exec", "ray", "start", f"--address=$(LWS_LEADER_ADDRESS):{RAY_PORT}", "--block"]
    leader = _pod_spec(unit, lead_type, lead_gpus, head, opts)
    worker = _pod_spec(unit, work_type, work_gpus, join, opts)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": len(unit.stages),
                "leaderTemplate": {"metadata": {"labels": {**labels, "coral/lws-role": "leader"}},
                                   "spec": leader},
                "workerTemplate": {"metadata": {"labels": labels}, "spec": worker},
            },
        },
    }  # fmt: skip


def service(name: str, labels: dict[str, str], port: int, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": port,
                                                "targetPort": port}]},
    }  # fmt: skip


def engine_objects(unit: EngineUnit, incarnation: str, opts: KubeOptions) -> list[dict[str, Any]]:
    name = engine_object_name(unit, incarnation)
    labels = _labels(unit, name)
    selector = {**labels, "coral/lws-role": "leader"} if unit.multi_machine else labels
    svc = service(name, labels, unit.http_port, opts.namespace)
    svc["spec"]["selector"] = selector
    return [engine_workload(unit, name, opts), svc]


def router_objects(
    router: RouterUnit, hosts: dict[str, str], opts: KubeOptions
) -> list[dict[str, Any]]:
    """ConfigMap (config.json), Deployment and Service of one router; the pod template carries
    the config's hash so a membership change rolls the router pods."""
    name = unit_name(router.unit_id)
    labels = _labels(router, name)
    config = json.dumps(router.config(hosts), indent=2, sort_keys=True)
    digest = _digest(config)
    meta = {"name": name, "namespace": opts.namespace, "labels": labels}
    container = {
        "name": "router", "image": opts.router_image,
        "command": ["python", "-m", "deploy.router.server", "/etc/coral/router.json"],
        "ports": [{"containerPort": router.http_port, "name": "http"}],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coral"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": router.http_port}},
    }  # fmt: skip
    pod = {"containers": [container],
           "volumes": [{"name": "config", "configMap": {"name": name}}]}  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
         "data": {"router.json": config}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels,
                                            "annotations": {"coral/config-hash": digest}},
                               "spec": pod}}},
        service(name, labels, router.http_port, opts.namespace),
    ]  # fmt: skip


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


_MODELS = {("v1", "Service"): "V1Service", ("v1", "ConfigMap"): "V1ConfigMap",
           ("apps/v1", "Deployment"): "V1Deployment"}  # fmt: skip
_API = ApiClient()


def _roundtrip(obj: dict[str, Any], model: str, where: str) -> None:
    """Deserialize into the client model and back; a dropped or altered field is an error."""
    try:
        parsed = _API._ApiClient__deserialize(obj, model)  # type: ignore[attr-defined]
    except (ValueError, TypeError) as error:
        raise InvalidObjectError(f"{where}: {error}") from error
    again = _API.sanitize_for_serialization(parsed)
    if again != obj:
        raise InvalidObjectError(f"{where}: fields not in the {model} schema or mistyped")


def validate_object(obj: dict[str, Any]) -> None:
    """Check one rendered object against the Kubernetes schema (raises InvalidObjectError)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    where = f"{key[1]} {obj.get('metadata', {}).get('name')}"
    if key in _MODELS:
        _roundtrip(obj, _MODELS[key], where)
        return
    if key != ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        raise InvalidObjectError(f"{where}: unknown kind {key}")
    _roundtrip(obj["metadata"], "V1ObjectMeta", where)
    lwt = obj["spec"]["leaderWorkerTemplate"]
    if set(obj["spec"]) - {"replicas", "leaderWorkerTemplate"} or not isinstance(lwt["size"], int):
        raise InvalidObjectError(f"{where}: unexpected LeaderWorkerSet spec fields")
    for part in ("leaderTemplate", "workerTemplate"):
        _roundtrip(lwt[part], "V1PodTemplateSpec", f"{where} {part}")
