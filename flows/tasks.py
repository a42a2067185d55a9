"""Prefect tasks: each wraps exactly one library call; retries and timeouts live here.

Business logic stays in the libraries (profiling, catalog_db, planning, deploy, reports), so
every step is callable and testable without Prefect. Catalog writes inside the libraries are
short transactions that retry DuckDB lock conflicts, so these tasks may overlap with nightly
profiling writing the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from catalog_db.churn_io import current_churn
from catalog_db.connection import read_connection
from catalog_db.demand_io import DemandRequest, build_demands
from catalog_db.inventory.snapshots import SnapshotResult, offers, take_snapshot
from catalog_db.plans_io import plan_and_store, read_templates
from catalog_db.reports_io import ReportResult, build_history_report, build_plan_report
from catalog_db.setup import InitSummary, init_catalog
from catalog_db.sim_io import SimRunSummary, simulate_plan
from catalog_db.templates_io import TemplateBuildSummary, rebuild_templates
from deploy.rollout import RolloutResult, rollout
from deploy.targets.base_target import make_target
from planning.domain import ModelDemand, Offer, Template
from planning.placement.plan import Plan
from planning.placement.problem import Churn, PlacementProblem
from profiling.runner import ProfilingSummary, run_profiling


@task(retries=2, retry_delay_seconds=5)
def init_catalog_task(db: Path) -> InitSummary:
    return init_catalog(db)


@task(timeout_seconds=6 * 3600)
def profile_task(
    db: Path,
    models: list[str] | None,
    gpus: list[str] | None,
    backend: str,
    scheduler: str | None,
    n_workers: int,
) -> ProfilingSummary:
    return run_profiling(
        db, models, gpus, backend, scheduler_address=scheduler, n_workers=n_workers
    )


@task(timeout_seconds=1800)
def build_templates_task(db: Path, models: list[str] | None) -> TemplateBuildSummary:
    return rebuild_templates(db, models=models)


@task(retries=1, retry_delay_seconds=10, timeout_seconds=600)
def snapshot_task(db: Path, source: str, **kwargs: Any) -> SnapshotResult:
    return take_snapshot(db, source, **kwargs)


@task
def offers_task(db: Path, snapshot_id: str) -> tuple[Offer, ...]:
    with read_connection(db) as con:
        return offers(con, snapshot_id)


@task
def templates_task(db: Path, models: tuple[str, ...]) -> tuple[Template, ...]:
    return read_templates(db, models)


@task(timeout_seconds=900)
def solve_task(
    db: Path, problem: PlacementProblem, snapshot: SnapshotResult, workload_source: str
) -> tuple[tuple[str, Plan], ...]:
    snapshot_id = snapshot.snapshot.snapshot_id if snapshot.snapshot else None
    return plan_and_store(
        db,
        problem,
        snapshot_id=snapshot_id,
        workload_source=workload_source,
        snapshot_age_s=snapshot.age_s,
        stale=snapshot.stale,
    )


@task(timeout_seconds=1800)
def simulate_task(db: Path, plan_id: str, trace: str, policy: str, seed: int) -> SimRunSummary:
    return simulate_plan(db, plan_id, trace=trace, policy=policy, seed=seed)


@task
def publish_verification_task(sim: SimRunSummary, attainment_target: float) -> bool:
    """A markdown artifact saying whether the plan met its SLOs on the trace; True if it did."""
    met = sim.slo_attainment >= attainment_target
    verdict = "meets" if met else "MISSES"
    create_markdown_artifact(
        f"# Plan `{sim.plan_id}` {verdict} its SLOs on trace `{sim.trace}`\n\n"
        f"| SLO attainment | target | goodput req/s | TTFT p99 s | TPOT p99 s | requests | dropped |\n"
        f"|---|---|---|---|---|---|---|\n"
        f"| {sim.slo_attainment:.3f} | {attainment_target:.2f} | {sim.goodput_req_per_s:.2f} "
        f"| {sim.ttft_p99_s:.2f} | {sim.tpot_p99_s:.3f} | {sim.requests} | {sim.dropped} |\n",
        key="replan-verification",
        description="simulated SLO attainment of the new plan",
    )
    return met


@task(retries=1)
def plan_report_task(db: Path, plan_id: str, out_dir: Path) -> ReportResult:
    return build_plan_report(db, plan_id, out_dir)


@task(retries=1)
def history_report_task(db: Path, since: str, out_dir: Path) -> ReportResult:
    return build_history_report(db, since, out_dir)


@task(timeout_seconds=3600)
def rollout_task(db: Path, plan_id: str, target: str, out_dir: Path) -> RolloutResult:
    return rollout(db, plan_id, make_target(target, out_dir=out_dir), out_dir)


@task
def publish_rollout_task(plan_id: str, target: str, result: RolloutResult) -> None:
    """A markdown artifact listing the rollout's status and the actions it applied."""
    lines = [f"# Rollout of plan `{plan_id}` on {target}: {result.status}", "", result.message, ""]
    lines += [f"- `{action_id}`" for action_id in result.executed]
    create_markdown_artifact("\n".join(lines), key="rollout", description="rollout actions")


@task
def publish_report_task(report: ReportResult, key: str) -> None:
    """Markdown summary, the main table and a link to the HTML report as Prefect artifacts."""
    create_markdown_artifact(report.markdown, key=f"{key}-summary", description="Coral report")
    if report.table_rows:
        create_table_artifact(report.table_rows, key=f"{key}-table")
    if report.html_path is not None:
        create_link_artifact(
            Path(report.html_path).resolve().as_uri(), link_text="HTML report", key=f"{key}-html"
        )


@task
def demand_task(db: Path, request: DemandRequest) -> tuple[ModelDemand, ...]:
    return build_demands(db, request)


@task
def churn_task(db: Path, target: str, penalty_usd_per_hr: float) -> Churn | None:
    return current_churn(db, target, penalty_usd_per_hr)
