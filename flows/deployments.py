"""The Prefect deployments `coral serve` registers, with their schedules.

nightly-profiling: cron `0 2 * * *` UTC; replan: every 15 minutes; cost-report: daily at
06:00 UTC; rollout: on demand (triggered from the UI or by replan). Default parameters come
from the settings object, so a UI run uses the same catalog and Dask scheduler as the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron, Interval

from flows.cost_report import cost_report
from flows.nightly_profiling import nightly_profiling
from flows.replan import ReplanParams, replan
from flows.rollout import rollout_plan
from flows.settings import Settings


@dataclass(frozen=True, slots=True)
class Schedules:
    profiling_cron: str = "0 2 * * *"
    replan_interval_s: float = 15 * 60
    cost_report_cron: str = "0 6 * * *"
    timezone: str = "UTC"


def build_deployments(
    settings: Settings, schedules: Schedules = Schedules()
) -> list[RunnerDeployment]:
    """One deployment per flow; schedules as above, parameters defaulted from `settings`."""
    replan_params = ReplanParams(
        db=settings.db,
        regions=settings.aws_regions,
        solver=settings.solver,
        time_limit_s=settings.solver_time_limit_s,
        headroom=settings.headroom,
        out_dir=settings.out_dir,
        aws_endpoint_url=settings.aws_endpoint_url,
    )
    return [
        nightly_profiling.to_deployment(
            "nightly",
            schedules=[Cron(schedules.profiling_cron, timezone=schedules.timezone)],
            parameters={
                "db": str(settings.db),
                "dask_scheduler": settings.dask_scheduler,
                "dask_workers": settings.dask_workers,
            },
            tags=["coral", "profiling"],
            description="Profile every model x GPU type, rebuild templates",
        ),
        replan.to_deployment(
            "every-15-min",
            schedules=[
                Interval(
                    timedelta(seconds=schedules.replan_interval_s), timezone=schedules.timezone
                )
            ],
            parameters={"params": replan_params.model_dump(mode="json")},
            tags=["coral", "replan"],
            description="Snapshot inventory, solve placement, report, roll out",
        ),
        rollout_plan.to_deployment(
            "on-demand",
            parameters={"db": str(settings.db), "out_dir": str(settings.out_dir)},
            tags=["coral", "deploy"],
            description="Roll a stored plan out on a target",
        ),
        cost_report.to_deployment(
            "daily",
            schedules=[Cron(schedules.cost_report_cron, timezone=schedules.timezone)],
            parameters={"db": str(settings.db), "out_dir": str(settings.out_dir)},
            tags=["coral", "reports"],
            description="Cost, savings and SLO attainment over the last day",
        ),
    ]
