"""Renting GPU machines on AWS as Dask workers for the vLLM backend, always giving them back.

`rent_gpu_workers(...)` is a context manager: it picks per GPU type the cheapest AWS instance
in the region with the most GPUs of that type (so every TP degree can be measured), checks
the whole fleet against a budget in $ and hours, launches one instance per GPU type (spot by
default) whose user data starts the vLLM container running
`dask worker <scheduler> --resources "GPU-<type>=1"`, waits for the workers to join, yields,
and terminates every instance it started in `finally` — on success, failure, KeyboardInterrupt
or timeout. Each machine also schedules its own shutdown (with
InstanceInitiatedShutdownBehavior=terminate) at the hours budget, in case this process dies.
Instances are tagged `coral:purpose=profiling` and `coral:run-id=<id>` so
`cleanup_leftovers()` can find and terminate what an earlier run left behind.
"""

from __future__ import annotations

import math
import shlex
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog_db import queries
from catalog_db.connection import read_connection
from planning.domain import InstanceType

PURPOSE_TAG = "coral:purpose"
PURPOSE = "profiling"
RUN_TAG = "coral:run-id"
GPU_TAG = "coral:gpu-type"
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
DEFAULT_IMAGE = "vllm/vllm-openai:latest"

WaitForWorkers = Callable[[str, Sequence[str], float], None]
"""(scheduler address, GPU types, timeout s) -> None; raises RentError when they don't join."""


class RentError(RuntimeError):
    """Renting could not go ahead (no instance type, over budget, workers never joined)."""


@dataclass(frozen=True, slots=True)
class RentBudget:
    max_usd: float
    max_hours: float


@dataclass(frozen=True, slots=True)
class RentPlan:
    gpu_type: str
    instance_type: str
    region: str
    gpu_count: int
    price_usd_per_hr: float
    spot: bool


@dataclass(frozen=True, slots=True)
class RentedFleet:
    run_id: str
    instance_ids: tuple[str, ...]
    plans: tuple[RentPlan, ...]


def plan_rentals(
    instances: Sequence[InstanceType], gpu_types: Sequence[str], region: str, spot: bool = True
) -> tuple[RentPlan, ...]:
    """Per GPU type: the cheapest AWS instance in `region` with the most GPUs of that type."""
    plans = []
    for gpu in gpu_types:
        offers = [
            i
            for i in instances
            if i.cloud == "aws" and i.region == region and i.gpu_type == gpu
            and (i.spot_usd_per_hr if spot else i.ondemand_usd_per_hr)
        ]  # fmt: skip
        if not offers:
            raise RentError(f"no AWS instance with GPU type {gpu!r} in region {region!r}")
        most = max(i.gpu_count for i in offers)
        best = min(
            (i for i in offers if i.gpu_count == most),
            key=lambda i: (i.spot_usd_per_hr if spot else i.ondemand_usd_per_hr) or math.inf,
        )
        price = best.spot_usd_per_hr if spot else best.ondemand_usd_per_hr
        plans.append(RentPlan(gpu, best.instance_type, region, most, float(price or 0.0), spot))
    return tuple(plans)


def check_budget(plans: Sequence[RentPlan], budget: RentBudget) -> float:
    """Worst-case cost ($) of running every plan for the hours budget; raises if over."""
    cost = sum(p.price_usd_per_hr for p in plans) * budget.max_hours
    if cost > budget.max_usd:
        raise RentError(
            f"renting {', '.join(p.instance_type for p in plans)} for {budget.max_hours:g} h "
            f"costs up to ${cost:,.2f}, over the budget of ${budget.max_usd:,.2f}"
        )
    return cost


def user_data(scheduler: str, gpu_type: str, max_hours: float, image: str = DEFAULT_IMAGE) -> str:
    """Boot script: self-terminate at the budget, then run a Dask worker in the vLLM image."""
    minutes = max(int(max_hours * 60), 1)
    worker = (
        f"pip install 'dask[distributed]' && dask worker {shlex.quote(scheduler)} "
        f"--nworkers 1 --nthreads 1 --resources {shlex.quote(f'GPU-{gpu_type}=1')}"
    )
    return "\n".join(
        [
            "#!/bin/bash",
            f"shutdown -h +{minutes}",
            f"docker run -d --gpus all --network host --ipc host --entrypoint bash "
            f"{shlex.quote(image)} -c {shlex.quote(worker)}",
            "",
        ]
    )


def _tags(run_id: str, gpu_type: str) -> list[dict[str, Any]]:
    tags = [
        {"Key": PURPOSE_TAG, "Value": PURPOSE},
        {"Key": RUN_TAG, "Value": run_id},
        {"Key": GPU_TAG, "Value": gpu_type},
    ]
    return [{"ResourceType": "instance", "Tags": tags}]


def launch(
    ec2: Any, plan: RentPlan, scheduler: str, run_id: str, image_id: str, hours: float
) -> str:
    """Start one tagged instance for `plan`; returns its id."""
    request: dict[str, Any] = {
        "ImageId": image_id,
        "InstanceType": plan.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "UserData": user_data(scheduler, plan.gpu_type, hours),
        "TagSpecifications": _tags(run_id, plan.gpu_type),
        "InstanceInitiatedShutdownBehavior": "terminate",
    }
    if plan.spot:
        request["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            },
        }
    response = ec2.run_instances(**request)
    return str(response["Instances"][0]["InstanceId"])


def terminate(ec2: Any, instance_ids: Sequence[str]) -> None:
    if instance_ids:
        ec2.terminate_instances(InstanceIds=list(instance_ids))


def tagged_instances(ec2: Any, run_id: str | None = None) -> list[str]:
    """Ids of live instances tagged as Coral profiling workers (of one run, or any)."""
    filters = [
        {"Name": f"tag:{PURPOSE_TAG}", "Values": [PURPOSE]},
        {"Name": "instance-state-name", "Values": LIVE_STATES},
    ]
    if run_id:
        filters.append({"Name": f"tag:{RUN_TAG}", "Values": [run_id]})
    ids = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            ids += [instance["InstanceId"] for instance in reservation["Instances"]]
    return ids


def cleanup_leftovers(ec2: Any, run_id: str | None = None) -> list[str]:
    """Terminate every live instance a profiling run left behind; returns their ids."""
    ids = tagged_instances(ec2, run_id)
    terminate(ec2, ids)
    return ids


def wait_for_dask_workers(scheduler: str, gpu_types: Sequence[str], timeout_s: float) -> None:
    """Block until a worker holding `GPU-<type>` has joined for every GPU type."""
    from distributed import Client

    wanted = {f"GPU-{g}" for g in gpu_types}
    deadline = time.monotonic() + timeout_s
    with Client(scheduler, timeout=timeout_s) as client:
        while True:
            workers = client.scheduler_info(n_workers=-1).get("workers", {}).values()
            held = {name for w in workers for name in w.get("resources", {})}
            if wanted <= held:
                return
            if time.monotonic() > deadline:
                missing = ", ".join(sorted(wanted - held))
                raise RentError(f"workers for {missing} did not join within {timeout_s:.0f} s")
            time.sleep(5.0)


def ec2_client(region: str, endpoint_url: str | None = None) -> Any:
    import boto3

    return boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)


@contextmanager
def rent_gpu_workers(
    db_path: Path | str,
    gpu_types: Sequence[str],
    scheduler: str,
    budget: RentBudget,
    image_id: str,
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    spot: bool = True,
    join_timeout_s: float = 1800.0,
    wait_for_workers: WaitForWorkers = wait_for_dask_workers,
    ec2: Any = None,
) -> Iterator[RentedFleet]:
    """Rent one machine per GPU type as Dask workers; terminate them all on exit."""
    with read_connection(db_path) as con:
        plans = plan_rentals(queries.instance_types(con, "aws"), gpu_types, region, spot)
    check_budget(plans, budget)
    ec2 = ec2 or ec2_client(region, endpoint_url)
    run_id = uuid.uuid4().hex[:12]
    started: list[str] = []
    try:
        for plan in plans:
            started.append(launch(ec2, plan, scheduler, run_id, image_id, budget.max_hours))
        wait_for_workers(scheduler, [p.gpu_type for p in plans], join_timeout_s)
        yield RentedFleet(run_id, tuple(started), plans)
    finally:
        terminate(ec2, started)
