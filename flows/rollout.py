"""`rollout` flow: deploy a stored plan on a target (the deploy library's diff-based rollout)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows.tasks import rollout_task


@flow(name="rollout", log_prints=True)
def rollout_plan(
    plan_id: str,
    target: Literal["dry-run", "kubernetes", "local"] = "dry-run",
    db: Path = Path("coral.duckdb"),
    out_dir: Path = Path("out"),
) -> str:
    """Roll `plan_id` out on `target`; returns the rollout status."""
    result = rollout_task(db, plan_id, target, out_dir)
    lines = [f"# Rollout of plan `{plan_id}` on {target}: {result.status}", "", result.message, ""]
    lines += [f"- `{action_id}`" for action_id in result.executed]
    create_markdown_artifact("\n".join(lines), key="rollout", description="rollout actions")
    print(f"rollout {result.deployment_id}: {result.status}; files in {result.render_dir}")
    return result.status
