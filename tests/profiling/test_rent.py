"""Renting GPU workers on AWS, against a real moto server on 127.0.0.1 (no real AWS)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest

from profiling.rent import (
    PURPOSE_TAG,
    RUN_TAG,
    RentBudget,
    RentError,
    check_budget,
    cleanup_leftovers,
    plan_rentals,
    rent_gpu_workers,
    tagged_instances,
    user_data,
)

MOTO = Path(sys.executable).parent / "moto_server"
AMI = "ami-12c6146b"  # one of moto's default AMIs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    port = _free_port()
    env = os.environ | {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    server = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/moto-api/", timeout=1.0)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError("moto server did not start")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def ec2(moto_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_url)
    cleanup_leftovers(client)  # each test starts from no live tagged instance
    return client


def _states(ec2, run_id: str) -> dict[str, str]:
    pages = ec2.describe_instances(Filters=[{"Name": f"tag:{RUN_TAG}", "Values": [run_id]}])
    return {
        i["InstanceId"]: i["State"]["Name"] for r in pages["Reservations"] for i in r["Instances"]
    }


BUDGET = RentBudget(max_usd=500.0, max_hours=2.0)


def test_launches_tagged_spot_instances_and_terminates_them(catalog_path, ec2) -> None:
    joined = []
    with rent_gpu_workers(catalog_path, ["L40S", "A10G"], "tcp://10.0.0.1:8786", BUDGET, AMI,
                          wait_for_workers=lambda s, g, t: joined.append((s, tuple(g))),
                          ec2=ec2) as fleet:  # fmt: skip
        assert joined == [("tcp://10.0.0.1:8786", ("L40S", "A10G"))]
        live = ec2.describe_instances(InstanceIds=list(fleet.instance_ids))["Reservations"]
        instances = [i for r in live for i in r["Instances"]]
        assert {i["InstanceType"] for i in instances} == {p.instance_type for p in fleet.plans}
        for instance in instances:
            tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
            assert tags[PURPOSE_TAG] == "profiling" and tags[RUN_TAG] == fleet.run_id
        assert set(tagged_instances(ec2, fleet.run_id)) == set(fleet.instance_ids)
    assert set(_states(ec2, fleet.run_id).values()) <= {"shutting-down", "terminated"}


def test_injected_failure_still_terminates_everything(catalog_path, ec2) -> None:
    seen = {}
    with pytest.raises(RuntimeError, match="injected"), rent_gpu_workers(
        catalog_path, ["L40S", "T4"], "tcp://10.0.0.1:8786", BUDGET, AMI,
        wait_for_workers=lambda *a: None, ec2=ec2,
    ) as fleet:  # fmt: skip
        seen["run"] = fleet.run_id
        assert len(tagged_instances(ec2, fleet.run_id)) == 2
        raise RuntimeError("injected failure mid-profiling")
    assert tagged_instances(ec2, seen["run"]) == []
    assert len(_states(ec2, seen["run"])) == 2


def test_workers_that_never_join_are_terminated(catalog_path, ec2) -> None:
    def never_join(scheduler, gpu_types, timeout_s):
        raise RentError("workers for GPU-L40S did not join within 0 s")

    with pytest.raises(RentError, match="did not join"), rent_gpu_workers(
        catalog_path, ["L40S"], "tcp://10.0.0.1:8786", BUDGET, AMI,
        wait_for_workers=never_join, ec2=ec2,
    ):  # fmt: skip
        pytest.fail("must not yield")
    assert tagged_instances(ec2) == []


def test_over_budget_launches_nothing(catalog_path, ec2) -> None:
    with pytest.raises(RentError, match="over the budget"), rent_gpu_workers(
        catalog_path, ["H100-SXM"], "tcp://10.0.0.1:8786", RentBudget(5.0, 2.0), AMI,
        wait_for_workers=lambda *a: None, ec2=ec2,
    ):  # fmt: skip
        pytest.fail("must not yield")
    assert tagged_instances(ec2) == []


def test_cleanup_finds_leftovers_of_an_earlier_run(ec2) -> None:
    ec2.run_instances(ImageId=AMI, InstanceType="g6e.xlarge", MinCount=1, MaxCount=1,
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [
                          {"Key": PURPOSE_TAG, "Value": "profiling"}, {"Key": RUN_TAG, "Value": "old"}]}])  # fmt: skip
    ec2.run_instances(ImageId=AMI, InstanceType="t3.micro", MinCount=1, MaxCount=1)  # not ours
    removed = cleanup_leftovers(ec2)
    assert len(removed) == 1 and tagged_instances(ec2) == []
    untagged = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                if i["InstanceType"] == "t3.micro"]  # fmt: skip
    assert all(i["State"]["Name"] == "running" for i in untagged)


def test_plans_and_user_data(catalog_path) -> None:
    from catalog_db import queries
    from catalog_db.connection import read_connection

    with read_connection(catalog_path) as con:
        instances = queries.instance_types(con, "aws")
    (plan,) = plan_rentals(instances, ["L40S"], "us-east-1")
    assert plan.gpu_count == 8 and plan.spot and plan.price_usd_per_hr > 0
    assert check_budget([plan], RentBudget(1e6, 1.0)) == pytest.approx(plan.price_usd_per_hr)
    with pytest.raises(RentError, match="'B200'"):
        plan_rentals(instances, ["B200"], "us-east-1")
    script = user_data("tcp://1.2.3.4:8786", "L40S", 1.5)
    assert "dask worker tcp://1.2.3.4:8786" in script and "GPU-L40S=1" in script
    assert "shutdown -h +90" in script
