"""`replan` flow: inventory snapshot → demand → solve → verify by simulation → report → rollout.

Runs every 15 minutes (flows/deployments.py) and from the Prefect UI, where `ReplanParams`
becomes the run form (pydantic validates it). Rollout happens when `auto_rollout` is set, or
after a person approves the plan in the UI: the flow pauses for a `RolloutApproval` input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, pause_flow_run
from prefect.exceptions import FlowPauseTimeout
from prefect.input import RunInput
from pydantic import BaseModel, Field

from catalog_db.demand_io import DemandRequest, WorkloadSource
from flows.tasks import (
    churn_task,
    demand_task,
    offers_task,
    plan_report_task,
    publish_report_task,
    publish_verification_task,
    rollout_task,
    simulate_task,
    snapshot_task,
    solve_task,
    templates_task,
)
from planning.placement.problem import Mode, PlacementProblem, SolverName

# ec2 needs an AMI and AWS clients: roll out there with `coral deploy --target ec2 --ami ...`
Target = Literal["dry-run", "kubernetes", "local"]
DEFAULT_MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B-Instruct",
]


class ReplanParams(BaseModel):
    """Every setting of one replan; shown and validated in the Prefect UI."""

    db: Path = Path("coral.duckdb")
    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS), min_length=1)
    mode: Mode = Mode.COST
    regions: list[str] | None = Field(None, description="None: every region the source knows")
    inventory_source: Literal["catalog", "aws", "file"] = "catalog"
    inventory_file: Path | None = None
    aws_endpoint_url: str | None = None
    workload_source: WorkloadSource = WorkloadSource.FORECAST
    workload_file: Path | None = None
    trace: str = "conv"
    total_rate_req_per_s: float = Field(20.0, gt=0)
    headroom: float = Field(0.1, ge=0)
    churn_penalty_usd_per_hr: float = Field(0.0, ge=0)
    solver: SolverName = SolverName.CBC
    time_limit_s: float = Field(30.0, gt=0)
    simulate: bool = True
    slo_attainment_target: float = Field(0.9, ge=0, le=1, description="flag plans below this")
    auto_rollout: bool = False
    target: Target = "dry-run"
    approval_timeout_s: int = Field(3600, gt=0)
    out_dir: Path = Path("out")

    def inventory_kwargs(self) -> dict[str, object]:
        if self.inventory_source == "file":
            return {"path": self.inventory_file}
        if self.inventory_source == "aws":
            regions = self.regions or ["us-east-1", "us-west-2"]
            return {"regions": regions, "endpoint_url": self.aws_endpoint_url}
        return {"regions": self.regions}

    def demand_request(self) -> DemandRequest:
        return DemandRequest(
            self.workload_source,
            tuple(self.models),
            trace=self.trace,
            total_rate_req_per_s=self.total_rate_req_per_s,
            workload_file=self.workload_file,
        )


class RolloutApproval(RunInput):
    """What a person answers in the Prefect UI before a plan is rolled out."""

    approve: bool = Field(False, description="roll this plan out now")


@flow(name="replan", log_prints=True)
def replan(params: ReplanParams = ReplanParams()) -> str:  # noqa: B008 (pydantic value)
    """Plan placement for all models on what can be rented now; returns the Coral plan id."""
    p, db = params, params.db
    snap = snapshot_task(db, p.inventory_source, **p.inventory_kwargs())
    if snap.snapshot is None:
        raise RuntimeError(f"no usable inventory snapshot: {snap.error}")
    demands = demand_task(db, p.demand_request())
    problem = PlacementProblem(
        templates=templates_task(db, tuple(d.model for d in demands)),
        offers=offers_task(db, snap.snapshot.snapshot_id),
        demands=demands,
        headroom=p.headroom,
        mode=p.mode,
        solver=p.solver,
        time_limit_s=p.time_limit_s,
        churn=churn_task(db, p.target, p.churn_penalty_usd_per_hr),
    )
    plan_id, plan = solve_task(db, problem, snap, p.workload_source)[0]
    if snap.stale:
        get_run_logger().warning(
            "planned on a %.0f s old snapshot: %s", snap.age_s or 0, snap.error
        )
    print(f"plan {plan_id}: {plan.status} ${plan.cost_usd_per_hr or 0:.2f}/h, gap {plan.gap}")
    if not plan.feasible:
        get_run_logger().warning("plan %s infeasible: %s", plan_id, plan.explanation)
        return plan_id
    if p.simulate:
        sim = simulate_task(db, plan_id, p.trace, "static", 0)
        if not publish_verification_task(sim, p.slo_attainment_target):
            get_run_logger().warning(
                "plan %s meets its SLOs for only %.1f%% of the trace's requests (target %.0f%%)",
                plan_id,
                100 * sim.slo_attainment,
                100 * p.slo_attainment_target,
            )
    publish_report_task(plan_report_task(db, plan_id, p.out_dir), key="replan")
    if p.auto_rollout or _approved(plan_id, p.approval_timeout_s):
        rollout_task(db, plan_id, p.target, p.out_dir)
    return plan_id


def _approved(plan_id: str, timeout_s: int) -> bool:
    """Pause until someone answers in the UI; no answer within the timeout means no rollout."""
    print(f"waiting up to {timeout_s} s for approval of plan {plan_id} in the Prefect UI")
    try:
        answer = pause_flow_run(wait_for_input=RolloutApproval, timeout=timeout_s, key=plan_id)
    except FlowPauseTimeout:
        print(f"no approval within {timeout_s} s: plan {plan_id} stays stored, not rolled out")
        return False
    return bool(answer and answer.approve)
