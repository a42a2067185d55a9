"""Flows against the Prefect test harness (one server per session): the wiring end to end,
the catalog rows and the artifacts each run leaves, reruns without duplicates, the stale
inventory path and the pause-for-approval path."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.flow_runs import resume_flow_run

from catalog_db.connection import read_connection
from flows.cost_report import cost_report
from flows.nightly_profiling import nightly_profiling
from flows.replan import ReplanParams, replan
from flows.rollout import rollout_plan
from tests.flows.conftest import FLOW_GPUS, FLOW_MODELS

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def db(profiled_catalog: Path, tmp_path: Path) -> Path:
    path = tmp_path / "coral.duckdb"
    shutil.copy(profiled_catalog, path)
    return path


def _params(db: Path, tmp_path: Path, **overrides: object) -> ReplanParams:
    values: dict[str, object] = {
        "db": db,
        "models": FLOW_MODELS,
        "total_rate_req_per_s": 4.0,
        "auto_rollout": True,
        "out_dir": tmp_path / "out",
        "trace": "code",
    }
    return ReplanParams(**{**values, **overrides})


def _rows(db: Path, sql: str, *args: object) -> list[tuple]:
    with read_connection(db) as con:
        return con.execute(sql, list(args)).fetchall()


def _artifact_keys(prefix: str) -> set[str]:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(
                    any_=[prefix, f"{prefix}-summary", f"{prefix}-table", f"{prefix}-html"]
                )
            )
        )
    return {a.key for a in found if a.key}


def test_replan_end_to_end_then_rerun_adds_nothing(db: Path, tmp_path: Path) -> None:
    plan_id = replan(_params(db, tmp_path))
    kinds = _rows(
        db,
        "SELECT kind FROM plans WHERE plan_id = ? OR parent_plan_id = ? ORDER BY 1",
        plan_id,
        plan_id,
    )
    assert [k for (k,) in kinds] == ["coral", "homogeneous", "homogeneous_pd", "melange"]
    assert _rows(db, "SELECT count(*) FROM sim_runs WHERE plan_id = ?", plan_id) == [(1,)]
    assert _rows(db, "SELECT count(*) FROM cost_reports WHERE plan_id = ?", plan_id) == [(1,)]
    assert _rows(db, "SELECT status FROM deployments WHERE plan_id = ?", plan_id) == [("active",)]
    assert _artifact_keys("replan") == {"replan-summary", "replan-table", "replan-html"}
    assert _artifact_keys("replan-verification") == {"replan-verification"}
    assert len(_rows(db, "SELECT * FROM plan_vs_baselines WHERE plan_id = ?", plan_id)) == 3

    # A rerun reads a new snapshot (a new plan id, stored beside the first), but the same
    # deployment: the rollout diff is empty, so no deployment or rollout action is added.
    before = {t: _rows(db, f"SELECT count(*) FROM {t}") for t in ("deployments", "rollout_events")}
    second = replan(_params(db, tmp_path, simulate=False))
    assert _rows(
        db, "SELECT count(*) FROM plans WHERE plan_id = ? OR parent_plan_id = ?", second, second
    ) == [(4,)]
    assert {t: _rows(db, f"SELECT count(*) FROM {t}") for t in before} == before


def test_failed_inventory_read_gives_a_stale_plan(db: Path, tmp_path: Path) -> None:
    replan(_params(db, tmp_path, simulate=False, auto_rollout=False, approval_timeout_s=1))
    bad = tmp_path / "inventory.yaml"
    bad.write_text("offers:\n  - {instance_type: p5.48xlarge, region: us-east-1, count: -3}\n")
    plan_id = replan(
        _params(
            db,
            tmp_path,
            inventory_source="file",
            inventory_file=bad,
            simulate=False,
            auto_rollout=False,
            approval_timeout_s=1,
        )
    )
    ((stale, age),) = _rows(
        db, "SELECT stale, snapshot_age_s FROM plans WHERE plan_id = ?", plan_id
    )
    assert stale is True and age is not None and age >= 0
    assert _rows(db, "SELECT count(*) FROM inventory_snapshots WHERE status = 'failed'") == [(1,)]


def test_rollout_waits_for_approval_in_the_ui(db: Path, tmp_path: Path) -> None:
    result: dict[str, str] = {}
    params = _params(db, tmp_path, simulate=False, auto_rollout=False, approval_timeout_s=240)
    worker = threading.Thread(target=lambda: result.update(plan=replan(params)))
    worker.start()
    paused = _wait_for_paused_run(timeout_s=180)
    assert _rows(db, "SELECT count(*) FROM deployments") == [(0,)]  # nothing before approval
    resume_flow_run(paused, run_input={"approve": True})
    worker.join(timeout=240)
    assert _rows(db, "SELECT status FROM deployments WHERE plan_id = ?", result["plan"]) == [
        ("active",)
    ]


def _wait_for_paused_run(timeout_s: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    state = FlowRunFilter(
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))
    )
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=state)
        if runs:
            return runs[0].id
        time.sleep(1)
    raise AssertionError("replan never paused for approval")


def test_nightly_profiling_resumes_without_new_points(db: Path) -> None:
    extra = ["Qwen/Qwen3-30B-A3B"]
    written = nightly_profiling(
        db=db, models=extra, gpus=FLOW_GPUS, backend="analytic", dask_workers=1
    )
    assert written > 0
    assert _rows(db, "SELECT count(*) > 0 FROM templates WHERE model = ?", extra[0]) == [(True,)]
    count = _rows(db, "SELECT count(*) FROM profiles")
    assert (
        nightly_profiling.fn(
            db=db, models=extra, gpus=FLOW_GPUS, backend="analytic", dask_workers=1
        )
        == 0
    )
    assert _rows(db, "SELECT count(*) FROM profiles") == count


def test_rollout_and_cost_report_flows(db: Path, tmp_path: Path) -> None:
    plan_id = replan(
        _params(db, tmp_path, simulate=False, auto_rollout=False, approval_timeout_s=1)
    )
    assert rollout_plan.fn(plan_id, "dry-run", db, tmp_path / "out") == "active"
    assert rollout_plan(plan_id, "dry-run", db, tmp_path / "out") == "unchanged"
    html = Path(cost_report.fn("1d", db, tmp_path / "out"))
    assert html.exists() and "plotly" in html.read_text()[:200_000].lower()
    assert _rows(db, "SELECT count(*) FROM cost_reports WHERE plan_id IS NULL") == [(1,)]
