"""`rollout` flow: deploy a stored plan on a target (the deploy library's diff-based rollout)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow

from flows.tasks import publish_rollout_task, rollout_task


@flow(name="rollout", log_prints=True)
def rollout_plan(
    plan_id: str,
    target: Literal["dry-run", "kubernetes", "local"] = "dry-run",
    db: Path = Path("coral.duckdb"),
    out_dir: Path = Path("out"),
) -> str:
    """Roll `plan_id` out on `target`; returns the rollout status."""
    result = rollout_task(db, plan_id, target, out_dir)
    publish_rollout_task(plan_id, target, result)
    print(f"rollout {result.deployment_id}: {result.status}; files in {result.render_dir}")
    return result.status
