"""EC2 target: one instance per machine of an engine (pipelines: one per stage), one small
instance per router, launched with boto3 `run_instances` through an injected client.

Instances carry tags naming the plan, deployment, unit, incarnation and role; their cloud-init
user data runs the vLLM container (multi-machine pipelines: Ray head + `vllm serve` on the
stage-0 machine, Ray workers on the others). A unit's incarnation tag makes create idempotent:
a rerun finds the instances an interrupted run launched instead of launching more.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from deploy.render.units import (
    HOST_IP_PLACEHOLDER,
    DeploymentSpec,
    EngineUnit,
    RouterUnit,
    spec_hash,
    unit_name,
)
from deploy.targets.base_target import (
    HttpRouterAdmin,
    RouterAdmin,
    TargetCannotProvideError,
    TargetName,
    Unit,
    push_router_config,
    register_target,
)

RAY_PORT = 6379
LIVE_STATES = ["pending", "running"]


def _docker(image: str, env: dict[str, str], shell: str, name: str) -> str:
    flags = " ".join(f"-e {k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    return (
        f"docker run -d --name {name} --gpus all --network host --ipc host {flags} "
        f"--entrypoint /bin/sh {image} -c {shlex.quote(shell)}"
    )


def engine_user_data(unit: EngineUnit, stage: int, leader_ip: str | None, image: str) -> str:
    """cloud-config for machine `stage` of an engine (0 = leader, runs `vllm serve`)."""
    env = {k: ("$HOST_IP" if v == HOST_IP_PLACEHOLDER else v) for k, v in unit.env}
    serve = shlex.join(unit.command)
    if stage == 0:
        shell = f"ray start --head --port={RAY_PORT} && {serve}" if unit.multi_machine else serve
    else:
        shell = f"ray start --address={leader_ip}:{RAY_PORT} --block"
    run = 'HOST_IP=$(hostname -I | cut -d" " -f1); ' + _docker(image, env, shell, "coral-engine")
    run = run.replace("'$HOST_IP'", '"$HOST_IP"')
    return "#cloud-config\n" + yaml.safe_dump({"runcmd": [["sh", "-c", run]]}, sort_keys=False)


def router_user_data(
    router: RouterUnit, hosts: dict[str, str], image: str, admin_token: str | None = None
) -> str:
    """cloud-config that runs the router container. It listens on all interfaces, so its
    admin API is reachable from the rollout host only with `admin_token` (no token: admin is
    loopback-only and `update_router` from elsewhere is refused)."""
    document = router.config(hosts) | ({"admin_token": admin_token} if admin_token else {})
    config = json.dumps(document, indent=2, sort_keys=True)
    files = [{"path": "/etc/coral/router.json", "content": config}]
    run = (
        "docker run -d --name coral-router --network host -v /etc/coral:/etc/coral "
        f"{image} python -m deploy.router.server /etc/coral/router.json"
    )
    doc = {"write_files": files, "runcmd": [["sh", "-c", run]]}
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False)


class Ec2Target:
    name = TargetName.EC2
    reachable = True  # health checks can reach its units from here

    def __init__(
        self,
        client_for_region: Callable[[str], Any],
        image_id: str,
        vllm_image: str = "vllm/vllm-openai:v0.27.1",
        router_image: str = "coral-router:latest",
        router_instance_type: str = "c7i.large",
        router_admin: RouterAdmin | None = None,
        router_admin_token: str | None = None,
    ) -> None:
        self.client_for_region = client_for_region
        self.router_admin_token = router_admin_token
        self.image_id = image_id
        self.vllm_image = vllm_image
        self.router_image = router_image
        self.router_instance_type = router_instance_type
        self.router_admin = router_admin or HttpRouterAdmin(token=router_admin_token)
        self.plan_id = ""
        self.deployment_id = ""

    def bind(self, plan_id: str, deployment_id: str) -> None:
        self.plan_id, self.deployment_id = plan_id, deployment_id

    def check(self, spec: DeploymentSpec) -> None:
        """AWS only, and every instance type offered in its region (DescribeInstanceTypeOfferings)."""
        wanted: dict[str, set[str]] = {}
        for cloud, unit_id in [(u.cloud, u.unit_id) for u in spec.engines]:
            if cloud != "aws":
                raise TargetCannotProvideError(f"ec2: {unit_id} is planned on {cloud}")
        for engine in spec.engines:
            wanted.setdefault(engine.region, set()).update(t for t, _ in engine.machines)
        for router in spec.routers:
            wanted.setdefault(router.region, set()).add(self.router_instance_type)
        for region, types in sorted(wanted.items()):
            offers = self.client_for_region(region).describe_instance_type_offerings(
                LocationType="region", Filters=[{"Name": "instance-type", "Values": sorted(types)}]
            )["InstanceTypeOfferings"]
            missing = types - {o["InstanceType"] for o in offers}
            if missing:
                raise TargetCannotProvideError(
                    f"ec2: instance type(s) {sorted(missing)} not offered in {region}"
                )

    def write_files(self, spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
        written = []
        for engine in spec.engines:
            for stage in range(len(engine.machines)):
                leader = None if stage == 0 else "${LEADER_IP}"
                path = out_dir / "ec2" / f"{unit_name(engine.unit_id)}-m{stage}.yaml"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(engine_user_data(engine, stage, leader, self.vllm_image))
                written.append(path)
        return tuple(written)

    def _tags(self, unit: Unit, machine: int) -> list[dict[str, str]]:
        role = str(unit.role) if isinstance(unit, EngineUnit) else "router"
        incarnation = f"{unit_name(unit.unit_id)}@{spec_hash(unit.to_dict())}"
        tags = {
            "Name": f"coral-{unit_name(unit.unit_id)}-m{machine}",
            "coral:plan": self.plan_id,
            "coral:deployment": self.deployment_id,
            "coral:unit": unit.unit_id,
            "coral:incarnation": incarnation,
            "coral:role": role,
            "coral:model": unit.model,
            "coral:machine": str(machine),
        }
        return [{"Key": k, "Value": v} for k, v in tags.items()]

    def _launch(self, unit: Unit, machine: int, itype: str, user_data: str) -> dict[str, Any]:
        response = self.client_for_region(unit.region).run_instances(
            ImageId=self.image_id,
            InstanceType=itype,
            MinCount=1,
            MaxCount=1,
            UserData=user_data,
            TagSpecifications=[{"ResourceType": "instance", "Tags": self._tags(unit, machine)}],
        )
        return dict(response["Instances"][0])

    def _instances(self, unit: Unit, external_id: str | None = None) -> list[dict[str, Any]]:
        incarnation = f"{unit_name(unit.unit_id)}@{spec_hash(unit.to_dict())}"
        filters = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        if external_id:
            kwargs: dict[str, Any] = {"InstanceIds": external_id.split(",")}
        else:
            filters.append({"Name": "tag:coral:incarnation", "Values": [incarnation]})
            kwargs = {}
        pages = self.client_for_region(unit.region).describe_instances(Filters=filters, **kwargs)
        found = [i for r in pages["Reservations"] for i in r["Instances"]]
        return sorted(found, key=lambda i: int(_tag(i, "coral:machine") or 0))

    def find(self, unit: Unit) -> str | None:
        found = self._instances(unit)
        return ",".join(i["InstanceId"] for i in found) if found else None

    def create(self, unit: Unit, hosts: dict[str, str]) -> str:
        if isinstance(unit, RouterUnit):
            data = router_user_data(unit, hosts, self.router_image, self.router_admin_token)
            return str(self._launch(unit, 0, self.router_instance_type, data)["InstanceId"])
        leader = self._launch(unit, 0, unit.machines[0][0], engine_user_data(unit, 0, None,
                                                                             self.vllm_image))  # fmt: skip
        ids = [leader["InstanceId"]]
        for m, (itype, _) in enumerate(unit.machines[1:], start=1):
            data = engine_user_data(unit, m, leader.get("PrivateIpAddress"), self.vllm_image)
            ids.append(self._launch(unit, m, itype, data)["InstanceId"])
        return ",".join(ids)

    def address(self, unit: Unit, external_id: str) -> str | None:
        found = self._instances(unit, external_id)
        ip = found[0].get("PrivateIpAddress") if found else None
        port = unit.http_port
        return f"{ip}:{port}" if ip else None

    def update_router(self, router: RouterUnit, external_id: str, hosts: dict[str, str]) -> None:
        """FluidPD parameters and instance set in place through the router's admin API (the
        router instance's private IP and the rendered router port; engines at `hosts`)."""
        address = self.address(router, external_id)
        if address:
            push_router_config(self.router_admin, f"http://{address}", router.config(hosts))

    def flip_role(self, router: RouterUnit, router_id: str, unit: EngineUnit) -> None:
        address = self.address(router, router_id)
        if address:
            self.router_admin.set_role(f"http://{address}", unit_name(unit.unit_id), str(unit.role))

    def drain(self, unit: Unit, external_id: str) -> None:
        """Mark the instances draining; the router already stopped sending them work."""
        client = self.client_for_region(unit.region)
        tags = [{"Key": "coral:state", "Value": "draining"}]
        client.create_tags(Resources=external_id.split(","), Tags=tags)

    def delete(self, unit: Unit, external_id: str) -> None:
        self.client_for_region(unit.region).terminate_instances(InstanceIds=external_id.split(","))


def _tag(instance: dict[str, Any], key: str) -> str | None:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), None)


@register_target(TargetName.EC2)
def _make(client_for_region: Callable[[str], Any], image_id: str, **kwargs: Any) -> Ec2Target:
    kwargs.pop("out_dir", None)
    return Ec2Target(client_for_region, image_id, **kwargs)
