"""Rollout: ordered, recorded, idempotent; resumes after an interruption without duplicate
instances; rolls back to the previous deployment when a health check fails."""

from __future__ import annotations

import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog_db.connection import read_connection
from catalog_db.deploy_io import PlanNotDeployableError, PlanNotFoundError, rollout_events
from deploy.render.diff import ActionKind
from deploy.render.render_plan import RenderError
from deploy.render.units import RouterUnit, unit_name
from deploy.rollout import http_health_checker, rollout
from deploy.targets.base_target import (
    HttpRouterAdmin,
    RecordingRouterAdmin,
    TargetCannotProvideError,
)
from deploy.targets.dryrun_target import DryRunTarget
from deploy.targets.ec2_target import Ec2Target
from deploy.targets.local_target import LocalTarget
from tests.deploy import plan_rows
from tests.deploy.conftest import live_instances


def _deployments(db: Path) -> list[tuple[str, str]]:
    with read_connection(db) as con:
        return con.execute(
            "SELECT deployment_id, status FROM deployments ORDER BY deployment_id"
        ).fetchall()


def test_dry_run_rollout_then_scale_up_creates_before_deleting(
    catalog_path: Path, tmp_path: Path
) -> None:
    plan_rows.insert_pd_pair(catalog_path, "plan-a", prefill=1, decode=1)
    target = DryRunTarget(tmp_path)
    first = rollout(catalog_path, "plan-a", target, tmp_path)
    assert first.status == "active"
    assert [a.kind for a in first.actions] == [ActionKind.CREATE] * 3  # router + 2 engines
    assert (first.render_dir / "deployment.json").exists()
    again = rollout(catalog_path, "plan-a", target, tmp_path)
    assert again.status == "unchanged" and again.deployment_id == first.deployment_id
    # plan-b: one more decode → create it, then give the router its new instance list
    plan_rows.insert_pd_pair(catalog_path, "plan-b", prefill=1, decode=2)
    second = rollout(catalog_path, "plan-b", target, tmp_path)
    assert [a.kind for a in second.actions] == [ActionKind.CREATE, ActionKind.UPDATE_ROUTER]
    assert _deployments(catalog_path) == [
        ("plan-a.dry-run.1", "superseded"), ("plan-b.dry-run.1", "active")]  # fmt: skip
    ops = [json.loads(line)["op"] for line in (tmp_path / "applied.jsonl").read_text().splitlines()]
    assert ops == ["create"] * 3 + ["create", "update_router"]


def test_flip_role_instead_of_replace(catalog_path: Path, tmp_path: Path) -> None:
    """2P+1D → 1P+2D on identical hardware: the router flips one engine; nothing restarts."""
    plan_rows.insert_pd_pair(catalog_path, "plan-a", prefill=2, decode=1)
    plan_rows.insert_pd_pair(catalog_path, "plan-b", prefill=1, decode=2)
    target = DryRunTarget(tmp_path)
    rollout(catalog_path, "plan-a", target, tmp_path)
    result = rollout(catalog_path, "plan-b", target, tmp_path)
    kinds = [a.kind for a in result.actions]
    assert kinds == [ActionKind.UPDATE_ROUTER, ActionKind.FLIP_ROLE]
    with read_connection(catalog_path) as con:
        exts = con.execute(
            "SELECT count(DISTINCT external_id), count(*) FROM deployment_units "
            "WHERE deployment_id = 'plan-b.dry-run.1' AND kind = 'engine'"
        ).fetchone()
    assert exts == (3, 3)


class Crash(RuntimeError):
    pass


def _checker(fail_on: int | None = None, crash_on: int | None = None) -> Any:
    calls: list[str] = []

    def check(url: str) -> bool:
        calls.append(url)
        if len(calls) == crash_on:
            raise Crash("process killed mid-rollout")
        return len(calls) != fail_on

    check.calls = calls  # type: ignore[attr-defined]
    return check


def test_interrupted_rollout_resumes_without_duplicates(
    catalog_path: Path, tmp_path: Path, ec2_factory: Any, ami: str
) -> None:
    plan_rows.insert_pd_pair(catalog_path, "plan-a", prefill=2, decode=2)
    target = Ec2Target(ec2_factory, ami, router_admin=RecordingRouterAdmin())
    # crash during the 3rd health check: router and 1st engine done, 2nd engine launched
    with pytest.raises(Crash):
        rollout(catalog_path, "plan-a", target, tmp_path, _checker(crash_on=3))
    client = ec2_factory("us-east-1")
    assert len(live_instances(client)) == 3
    assert _deployments(catalog_path) == [("plan-a.ec2.1", "applying")]
    result = rollout(catalog_path, "plan-a", target, tmp_path, _checker())
    assert result.status == "active" and result.deployment_id == "plan-a.ec2.1"
    assert len(result.skipped) == 2 and len(result.executed) == 3
    instances = live_instances(client)
    assert len(instances) == 5  # 1 router + 4 engines, none launched twice
    units = [{t["Key"]: t["Value"] for t in i["Tags"]}["coral:unit"] for i in instances]
    assert len(set(units)) == 5


def test_failed_health_check_rolls_back_to_previous(
    catalog_path: Path, tmp_path: Path, ec2_factory: Any, ami: str
) -> None:
    plan_rows.insert_pd_pair(catalog_path, "plan-a", prefill=1, decode=1)
    plan_rows.insert_pd_pair(catalog_path, "plan-b", prefill=2, decode=3)
    admin = RecordingRouterAdmin()
    target = Ec2Target(ec2_factory, ami, router_admin=admin)
    rollout(catalog_path, "plan-a", target, tmp_path, _checker())
    client = ec2_factory("us-east-1")
    before = sorted(i["InstanceId"] for i in live_instances(client))
    result = rollout(catalog_path, "plan-b", target, tmp_path, _checker(fail_on=2))
    assert result.status == "rolled_back"
    assert sorted(i["InstanceId"] for i in live_instances(client)) == before
    assert _deployments(catalog_path) == [
        ("plan-a.ec2.1", "active"), ("plan-b.ec2.1", "rolled_back")]  # fmt: skip
    with read_connection(catalog_path) as con:
        events = rollout_events(con, "plan-b.ec2.1")
    statuses = [(kind, status) for _, _, kind, _, status, _ in events]
    assert ("create", "failed") in statuses and ("rollback", "done") in statuses
    assert not any(k in ("drain", "delete") for k, _ in statuses)  # old capacity untouched


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        (lambda db: None, PlanNotFoundError),
        (lambda db: plan_rows.insert_plan(db, "p", [plan_rows.PD_PREFILL],
                                          [plan_rows.Assign(plan_rows.PD_PREFILL.template_id, 1)],
                                          [plan_rows.P5], status="infeasible"),
         PlanNotDeployableError),
        (lambda db: plan_rows.insert_plan(db, "p", [plan_rows.PD_PREFILL],
                                          [plan_rows.Assign(plan_rows.PD_PREFILL.template_id, 1)],
                                          [plan_rows.P5], stale=True), PlanNotDeployableError),
        (lambda db: plan_rows.insert_plan(
            db, "p", [plan_rows.MIXED_PREFILL.__class__(**{**plan_rows.MIXED_PREFILL.__dict__,
                                                            "pp_layer_partition": None})],
            [plan_rows.Assign(plan_rows.MIXED_PREFILL.template_id, 1)],
            [plan_rows.P5, plan_rows.Rental("p4de.24xlarge", "A100-SXM-80GB", 8, 1)]),
         RenderError),
    ],
)  # fmt: skip
def test_bad_input_applies_nothing(
    catalog_path: Path, tmp_path: Path, setup: Any, error: type[Exception]
) -> None:
    setup(catalog_path)
    with pytest.raises(error):
        rollout(catalog_path, "p", DryRunTarget(tmp_path), tmp_path)
    assert _deployments(catalog_path) == []
    assert not (tmp_path / "applied.jsonl").exists()


def test_target_that_cannot_provide_applies_nothing(catalog_path: Path, tmp_path: Path) -> None:
    plan_rows.insert_pd_pair(catalog_path, "plan-a")
    target = LocalTarget(tmp_path / "state", host_gpus=1)  # the plan needs 2 GPUs
    with pytest.raises(TargetCannotProvideError, match="this host has 1"):
        rollout(catalog_path, "plan-a", target, tmp_path)
    assert _deployments(catalog_path) == []


HEALTH_SERVER = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404); self.end_headers()
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


def test_local_target_starts_processes_and_gates_on_health(
    catalog_path: Path, tmp_path: Path
) -> None:
    """Local processes (a stand-in HTTP server answering /health) pass the real HTTP check."""
    plan_rows.insert_pd_pair(catalog_path, "plan-a")
    admin = RecordingRouterAdmin()

    def launcher(unit: Any, port: int, config: Path) -> list[str]:
        return [sys.executable, "-c", HEALTH_SERVER, str(port)]

    target = LocalTarget(tmp_path / "state", host_gpus=8, launcher=launcher, router_admin=admin)
    result = rollout(catalog_path, "plan-a", target, tmp_path,
                     http_health_checker(timeout_s=20, interval_s=0.2))  # fmt: skip
    assert result.status == "active"
    with read_connection(catalog_path) as con:
        rows = con.execute("SELECT unit_id, external_id, status FROM deployment_units").fetchall()
    assert len(rows) == 3 and all(status == "running" for _, _, status in rows)
    router_config = json.loads(next((tmp_path / "state").glob("*.router.json")).read_text())
    assert all(i["url"].startswith("http://127.0.0.1:") for i in router_config["instances"])
    units = {u.unit_id: u for u in _spec_units(catalog_path)}
    for unit_id, external_id, _ in rows:  # stop what we started
        target.delete(units[unit_id], external_id)
    assert not list((tmp_path / "state").glob("*@*.json"))


def _spec_units(db: Path) -> list[Any]:
    from catalog_db.deploy_io import get_deployment

    with read_connection(db) as con:
        spec = get_deployment(con, "plan-a.local.1").spec
    return [*spec.engines, *spec.routers]


def _fake_launcher(unit: Any, port: int, config: Path) -> list[str]:
    """Routers run the real router server; engines the fake engine (TEST DOUBLE)."""
    if isinstance(unit, RouterUnit):
        return [sys.executable, "-m", "deploy.router.server", str(config)]
    return [sys.executable, "-m", "deploy.testing.fake_engine", "--id",
            unit_name(unit.unit_id), "--port", str(port)]  # fmt: skip


def test_local_update_router_changes_a_running_routers_instances(
    catalog_path: Path, tmp_path: Path
) -> None:
    """plan-a (1P+1D) then plan-b (1P+2D) on the local target: the running router process
    learns the new decode engine through `PUT /admin/instances` and sends it traffic."""
    from catalog_db.deploy_io import get_deployment

    plan_rows.insert_pd_pair(catalog_path, "plan-a", prefill=1, decode=1)
    plan_rows.insert_pd_pair(catalog_path, "plan-b", prefill=1, decode=2)
    http = httpx.Client(timeout=30, trust_env=False)
    target = LocalTarget(tmp_path / "state", host_gpus=8, launcher=_fake_launcher,
                         router_admin=HttpRouterAdmin(client=http))  # fmt: skip
    check = http_health_checker(timeout_s=30, interval_s=0.1)
    started: dict[str, tuple[Any, str]] = {}
    try:
        first = rollout(catalog_path, "plan-a", target, tmp_path, check)
        assert first.status == "active"
        with read_connection(catalog_path) as con:
            dep_a = get_deployment(con, "plan-a.local.1")
        units = {u.unit_id: u for u in [*dep_a.spec.engines, *dep_a.spec.routers]}
        started.update({k: (units[k], v) for k, v in dep_a.external_ids.items()})
        (router,) = dep_a.spec.routers
        url = f"http://{target.address(router, dep_a.external_ids[router.unit_id])}"
        assert len(http.get(f"{url}/admin/instances").json()["instances"]) == 2

        second = rollout(catalog_path, "plan-b", target, tmp_path, check)
        assert second.status == "active"
        assert [a.kind for a in second.actions] == [ActionKind.CREATE, ActionKind.UPDATE_ROUTER]
        with read_connection(catalog_path) as con:
            dep_b = get_deployment(con, "plan-b.local.1")
        units = {u.unit_id: u for u in [*dep_b.spec.engines, *dep_b.spec.routers]}
        started.update({k: (units[k], v) for k, v in dep_b.external_ids.items()})
        assert dep_b.external_ids[router.unit_id] == dep_a.external_ids[router.unit_id]
        (new,) = set(dep_b.external_ids) - set(dep_a.external_ids)
        new_url = f"http://{target.address(units[new], dep_b.external_ids[new])}"
        live = http.get(f"{url}/admin/instances").json()["instances"]
        assert {i["id"] for i in live} == {unit_name(e.unit_id) for e in dep_b.spec.engines}
        assert {"id": unit_name(new), "url": new_url, "role": "decode"} in live

        body = {"model": "m", "prompt": "alpha beta " * 100, "max_tokens": 16}
        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(lambda _: http.post(f"{url}/v1/completions", json=body)
                                  .status_code, range(24)))  # fmt: skip
        assert codes == [200] * 24
        assert http.get(f"{new_url}/fake/log").json()  # the new engine got work
    finally:
        for unit, external_id in started.values():
            target.delete(unit, external_id)
        http.close()
