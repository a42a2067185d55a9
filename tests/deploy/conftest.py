"""Deploy test fixtures: a real moto EC2 server on 127.0.0.1 for the session."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TEST_AMI = {
    "ami_id": "ami-0c0a1d0e5t", "state": "available", "public": True, "owner_id": "801119661308",
    "image_location": "coral/test", "sriov": "simple", "root_device_type": "ebs",
    "root_device_name": "/dev/sda1", "description": "coral test image", "image_type": "machine",
    "platform": None, "architecture": "x86_64", "name": "coral-test", "virtualization_type": "hvm",
    "hypervisor": "xen",
}  # fmt: skip


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto_server with a one-image AMI catalogue (loading moto's 1,300 default AMIs per region
    costs seconds on every backend reset)."""
    amis = tmp_path_factory.mktemp("moto") / "amis.json"
    amis.write_text(json.dumps([TEST_AMI]))
    port = _free_port()
    moto = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_AMIS_PATH": str(amis)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1.0)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                proc.terminate()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def ec2_factory(moto_endpoint: str) -> Iterator[Any]:
    """client_for_region for the moto server; resets moto's state after the test."""

    def client(region: str) -> Any:
        return boto3.client(
            "ec2", region_name=region, endpoint_url=moto_endpoint,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip

    yield client
    httpx.post(f"{moto_endpoint}/moto-api/reset", timeout=10.0)


@pytest.fixture
def ami(ec2_factory: Any) -> str:
    images = ec2_factory("us-east-1").describe_images(ImageIds=[TEST_AMI["ami_id"]])["Images"]
    return str(images[0]["ImageId"])


def live_instances(client: Any) -> list[dict[str, Any]]:
    pages = client.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i for r in pages["Reservations"] for i in r["Instances"]]
