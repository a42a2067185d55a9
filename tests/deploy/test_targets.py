"""Targets: Kubernetes objects validate against the official client models; EC2 launches on a
moto server carry plan/deployment/role tags and cloud-init that starts vLLM."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog_db.connection import read_connection
from catalog_db.deploy_io import load_render_input
from deploy.render.render_plan import render_deployment
from deploy.render.units import DeploymentSpec
from deploy.targets.base_target import (
    RecordingRouterAdmin,
    TargetCannotProvideError,
    TargetName,
    make_target,
)
from deploy.targets.ec2_target import Ec2Target
from deploy.targets.kubernetes_objects import (
    InvalidObjectError,
    KubeOptions,
    validate_object,
)
from deploy.targets.kubernetes_target import render_manifests
from tests.deploy import plan_rows
from tests.deploy.conftest import live_instances


def _spec(db: Path, insert: Any, plan_id: str) -> DeploymentSpec:
    insert(db)
    with read_connection(db) as con:
        return render_deployment(load_render_input(con, plan_id))


def test_kubernetes_objects_validate(catalog_path: Path) -> None:
    spec = _spec(catalog_path, plan_rows.insert_mixed_pipeline, "plan-mixed")
    objects = render_manifests(spec, KubeOptions())
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "Deployment", "Deployment", "LeaderWorkerSet", "Service",
                     "Service", "Service"]  # fmt: skip
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader, worker = lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]
    assert leader["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert worker["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4de.24xlarge"}
    assert leader["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert "VLLM_PP_LAYER_PARTITION" in {e["name"] for e in leader["containers"][0]["env"]}
    assert "vllm serve" in leader["containers"][0]["args"][0]
    host = next(e for e in leader["containers"][0]["env"]
                if e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST")  # fmt: skip
    assert host["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert '"fluidpd"' in config_map["data"]["router.json"]


def test_kubernetes_validation_catches_schema_errors(catalog_path: Path) -> None:
    spec = _spec(catalog_path, plan_rows.insert_pd_pair, "plan-pd")
    deployment = next(o for o in render_manifests(spec, KubeOptions()) if o["kind"] == "Deployment")
    validate_object(deployment)
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["nodeSelektor"] = {"x": "y"}
    with pytest.raises(InvalidObjectError, match="schema"):
        validate_object(typo)
    unnamed = copy.deepcopy(deployment)
    del unnamed["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(InvalidObjectError):
        validate_object(unnamed)


def test_kubernetes_refuses_instance_types_the_cluster_lacks(
    catalog_path: Path, tmp_path: Path
) -> None:
    spec = _spec(catalog_path, plan_rows.insert_mixed_pipeline, "plan-mixed")
    target = make_target(TargetName.KUBERNETES, out_dir=tmp_path,
                         node_instance_types=frozenset({"p5.48xlarge"}))  # fmt: skip
    with pytest.raises(TargetCannotProvideError, match=r"p4de\.24xlarge"):
        target.check(spec)
    written = target.write_files(spec, tmp_path / "render")
    docs = list(yaml.safe_load_all(written[0].read_text()))
    assert len(docs) == 7


def test_ec2_launch_tags_and_user_data(catalog_path: Path, ec2_factory: Any, ami: str) -> None:
    spec = _spec(catalog_path, plan_rows.insert_mixed_pipeline, "plan-mixed")
    target = Ec2Target(ec2_factory, ami)
    target.check(spec)
    target.bind("plan-mixed", "dep-1")
    prefill = next(e for e in spec.engines if e.role == "prefill")
    external_id = target.create(prefill, {})
    client = ec2_factory("us-east-1")
    instances = sorted(live_instances(client), key=lambda i: i["LaunchTime"])
    assert external_id.split(",") == [i["InstanceId"] for i in instances]
    assert [i["InstanceType"] for i in instances] == ["p5.48xlarge", "p4de.24xlarge"]
    for machine, inst in enumerate(instances):
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        assert tags["coral:plan"] == "plan-mixed"
        assert tags["coral:deployment"] == "dep-1"
        assert tags["coral:role"] == "prefill"
        assert tags["coral:unit"] == prefill.unit_id
        assert tags["coral:machine"] == str(machine)
        raw = client.describe_instance_attribute(InstanceId=inst["InstanceId"],
                                                 Attribute="userData")["UserData"]["Value"]  # fmt: skip
        user_data = base64.b64decode(raw).decode()
        assert user_data.startswith("#cloud-config\n")
        (command,) = yaml.safe_load(user_data)["runcmd"]
        if machine == 0:
            assert "vllm serve meta-llama/Llama-3.1-70B-Instruct" in command[2]
            assert "VLLM_PP_LAYER_PARTITION=44,36" in command[2]
            assert "ray start --head" in command[2]
        else:
            assert f"--address={instances[0]['PrivateIpAddress']}:6379" in command[2]
    assert target.find(prefill) == external_id  # a rerun finds, not relaunches


def test_ec2_refuses_what_it_cannot_provide(catalog_path: Path, ec2_factory: Any, ami: str) -> None:
    plan_rows.insert_plan(
        catalog_path, "plan-gcp", [plan_rows.PD_PREFILL, plan_rows.PD_DECODE],
        [plan_rows.Assign(plan_rows.PD_PREFILL.template_id, 1, cloud="gcp"),
         plan_rows.Assign(plan_rows.PD_DECODE.template_id, 1, cloud="gcp")],
        [plan_rows.Rental("a3-highgpu-8g", "H100-SXM", 8, 1, cloud="gcp")],
    )  # fmt: skip
    with read_connection(catalog_path) as con:
        spec = render_deployment(load_render_input(con, "plan-gcp"))
    with pytest.raises(TargetCannotProvideError, match="planned on gcp"):
        Ec2Target(ec2_factory, ami).check(spec)
    pd = _spec(catalog_path, plan_rows.insert_pd_pair, "plan-pd")
    with pytest.raises(TargetCannotProvideError, match="not offered"):
        Ec2Target(ec2_factory, ami, router_instance_type="x9.bogus").check(pd)
    assert live_instances(ec2_factory("us-east-1")) == []


def test_ec2_update_router_pushes_params_and_instances(
    catalog_path: Path, ec2_factory: Any, ami: str
) -> None:
    """The router's admin API at its instance's private IP and rendered port gets the FluidPD
    parameters and the new instance set (engines at the addresses the target gave them)."""
    spec = _spec(catalog_path, plan_rows.insert_pd_pair, "plan-pd")
    admin = RecordingRouterAdmin()
    target = Ec2Target(ec2_factory, ami, router_admin=admin, router_admin_token="s3cret")
    target.bind("plan-pd", "dep-1")
    (router,) = spec.routers
    external_id = target.create(router, {})
    client = ec2_factory("us-east-1")
    (inst,) = live_instances(client)
    raw = client.describe_instance_attribute(InstanceId=inst["InstanceId"],
                                             Attribute="userData")["UserData"]["Value"]  # fmt: skip
    files = yaml.safe_load(base64.b64decode(raw).decode())["write_files"]
    assert '"admin_token": "s3cret"' in files[0]["content"]  # admin reachable from here
    hosts = {e.unit_id: f"10.0.0.{n}:8000" for n, e in enumerate(spec.engines, start=5)}
    target.update_router(router, external_id, hosts)
    url = f"http://{inst['PrivateIpAddress']}:{router.http_port}"
    assert [(op, where) for op, where, _ in admin.calls] == [
        ("put_params", url), ("put_instances", url)]  # fmt: skip
    assert admin.calls[0][2] == dict(router.fluidpd)
    assert sorted(i["url"] for i in admin.calls[1][2]) == sorted(
        f"http://{h}" for h in hosts.values()
    )
