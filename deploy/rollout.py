"""Roll a stored plan out to a target: render → check → diff → apply in order → record.

- Nothing is applied unless the plan loads, renders and the target can provide every unit
  (`prepare` raises first).
- Actions run in the diff's order (create before delete), each recorded in `rollout_events`
  (started, then done) in its own short write transaction; new engines and routers must pass
  their `/health` check before the rollout moves on.
- A rerun of the same plan on the same target resumes the unfinished deployment: actions
  recorded done are skipped, and a create that was started but not recorded finds the unit it
  launched (`target.find`) instead of launching another.
- A failed health check stops the rollout; `OnFailure.ROLLBACK` (default) then undoes this
  deployment's applied actions in reverse (delete what it created, restore router configs and
  roles) and leaves the previous deployment active; `OnFailure.STOP` leaves it for a rerun.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import httpx

from catalog_db import deploy_io
from catalog_db.connection import read_connection, write_transaction
from deploy.render.diff import Action, ActionKind, Diff, diff_deployments
from deploy.render.render_plan import render_deployment
from deploy.render.units import DeploymentSpec, EngineUnit, RouterUnit
from deploy.targets.base_target import DeployTarget, Unit
from planning.routing.fluidpd_params import FluidPDParams

HealthChecker = Callable[[str], bool]  # base URL → healthy


class OnFailure(StrEnum):
    ROLLBACK = "rollback"
    STOP = "stop"


class HealthCheckFailedError(RuntimeError):
    """A new unit did not become healthy."""


@dataclass(frozen=True, slots=True)
class Prepared:
    spec: DeploymentSpec
    current: deploy_io.StoredDeployment | None
    diff: Diff


@dataclass(frozen=True, slots=True)
class RolloutResult:
    deployment_id: str | None  # None: nothing to change
    status: str  # active | unchanged | rolled_back | failed
    actions: tuple[Action, ...]
    executed: tuple[str, ...]  # action ids applied by this run
    skipped: tuple[str, ...]  # action ids already done by an earlier run
    render_dir: Path | None
    message: str


def http_health_checker(timeout_s: float = 900.0, interval_s: float = 5.0) -> HealthChecker:
    """Polls `GET {url}/health` until 200 or `timeout_s` (vLLM loads weights first)."""

    def check(url: str) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(interval_s)

    return check


def prepare(
    db_path: Path, plan_id: str, target: DeployTarget, fluidpd: FluidPDParams | None = None
) -> Prepared:
    """Render the plan, check the target can run it, diff against what runs there now.
    Raises (PlanNotFoundError, PlanNotDeployableError, RenderError,
    TargetCannotProvideError) before anything is applied."""
    with read_connection(db_path) as con:
        data = deploy_io.load_render_input(con, plan_id)
        current = deploy_io.active_deployment(con, str(target.name))
    spec = render_deployment(data, fluidpd)
    target.check(spec)
    return Prepared(spec, current, diff_deployments(current.spec if current else None, spec))


@dataclass
class _Run:
    """Mutable bookkeeping of one apply pass (local to `rollout`)."""

    db: Path
    deployment_id: str
    target: DeployTarget
    prepared: Prepared
    checker: HealthChecker | None
    new_ext: dict[str, str]
    executed: list[str]
    skipped: list[str]
    pending: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def record(self, action: Action | str, kind: str, unit_id: str | None, status: str,
               message: str | None = None) -> None:  # fmt: skip
        """One event, plus the unit updates the action queued, in one transaction."""
        action_id = action.action_id if isinstance(action, Action) else action
        with write_transaction(self.db) as con:
            deploy_io.record_event(
                con, self.deployment_id, action_id, kind, unit_id, status, message
            )
            for deployment_id, unit, unit_status, external_id in self.pending:
                deploy_io.set_unit(con, deployment_id, unit, unit_status, external_id)
        self.pending.clear()

    def set_unit(self, unit_id: str, status: str, external_id: str | None = None,
                 deployment_id: str | None = None) -> None:  # fmt: skip
        """Queue a unit update; written with the action's next event."""
        self.pending.append((deployment_id or self.deployment_id, unit_id, status, external_id))

    @property
    def cur_ext(self) -> dict[str, str]:
        return self.prepared.current.external_ids if self.prepared.current else {}

    def hosts(self) -> dict[str, str]:
        out = {}
        for engine in self.prepared.spec.engines:
            ext = self.new_ext.get(engine.unit_id)
            address = self.target.address(engine, ext) if ext else None
            if address:
                out[engine.unit_id] = address
        return out


def _desired(spec: DeploymentSpec, unit_id: str) -> Unit:
    units: list[Unit] = [*spec.engines, *spec.routers]
    return next(u for u in units if u.unit_id == unit_id)


def _current(run: _Run, unit_id: str) -> Unit:
    assert run.prepared.current is not None  # drain/delete only exist with a current deployment
    return _desired(run.prepared.current.spec, unit_id)


def _router_of(spec: DeploymentSpec, unit: EngineUnit) -> RouterUnit:
    return next(r for r in spec.routers if (r.cloud, r.region, r.model) ==
                (unit.cloud, unit.region, unit.model))  # fmt: skip


def _gate(run: _Run, unit: Unit, external_id: str) -> None:
    if run.checker is None or not run.target.reachable:
        return
    address = run.target.address(unit, external_id)
    if address and not run.checker(f"http://{address}"):
        raise HealthCheckFailedError(f"{unit.unit_id} at {address} failed its /health check")


def _create(run: _Run, action: Action) -> None:
    unit = _desired(run.prepared.spec, action.unit_id)
    hosts = run.hosts()
    external_id = run.target.find(unit) or run.target.create(unit, hosts)
    run.new_ext[unit.unit_id] = external_id
    run.set_unit(unit.unit_id, "starting", external_id)
    _gate(run, unit, external_id)  # a failure records the unit as starting, with its id
    run.set_unit(unit.unit_id, "running")


def _apply(run: _Run, action: Action) -> None:
    spec, kind = run.prepared.spec, action.kind
    if kind is ActionKind.CREATE:
        _create(run, action)
    elif kind is ActionKind.UPDATE_ROUTER:
        router = _desired(spec, action.unit_id)
        assert isinstance(router, RouterUnit)
        run.target.update_router(router, run.new_ext[router.unit_id], run.hosts())
    elif kind is ActionKind.FLIP_ROLE:
        unit = _desired(spec, action.unit_id)
        assert isinstance(unit, EngineUnit) and action.source_unit_id is not None
        router = _router_of(spec, unit)
        run.target.flip_role(router, run.new_ext[router.unit_id], unit)
        run.set_unit(unit.unit_id, "running", run.cur_ext[action.source_unit_id])
    elif kind is ActionKind.DRAIN:
        run.target.drain(_current(run, action.unit_id), run.cur_ext[action.unit_id])
        run.set_unit(action.unit_id, "draining", deployment_id=_prev_id(run))
    elif kind is ActionKind.DELETE:
        run.target.delete(_current(run, action.unit_id), run.cur_ext[action.unit_id])
        run.set_unit(action.unit_id, "deleted", deployment_id=_prev_id(run))


def _prev_id(run: _Run) -> str:
    assert run.prepared.current is not None
    return run.prepared.current.deployment_id


def _start(db: Path, prepared: Prepared, target: DeployTarget, out_dir: Path) -> tuple[str, Path]:
    """Resume the plan's unfinished deployment on this target, or record a new one."""
    name, plan_id = str(target.name), prepared.spec.plan_id
    with write_transaction(db) as con:
        deployment_id = deploy_io.resumable_deployment(con, plan_id, name)
        render_dir = out_dir / (deployment_id or deploy_io.next_deployment_id(con, plan_id, name))
        if deployment_id is None:
            deployment_id = render_dir.name
            previous = prepared.current.deployment_id if prepared.current else None
            deploy_io.insert_deployment(
                con, deployment_id, prepared.spec, name, str(render_dir), previous
            )
        deploy_io.set_deployment_status(con, deployment_id, "applying")
        for desired_id, current_id in prepared.diff.inherited:
            ext = prepared.current.external_ids.get(current_id) if prepared.current else None
            if ext:
                deploy_io.set_unit(con, deployment_id, desired_id, "running", ext)
    return deployment_id, render_dir


def rollout(
    db_path: Path,
    plan_id: str,
    target: DeployTarget,
    out_dir: Path,
    health_checker: HealthChecker | None = None,
    *,
    fluidpd: FluidPDParams | None = None,
    on_failure: OnFailure = OnFailure.ROLLBACK,
) -> RolloutResult:
    """Deploy `plan_id` on `target`; see the module docstring for ordering and recovery."""
    prepared = prepare(db_path, plan_id, target, fluidpd)
    with read_connection(db_path) as con:
        resumable = deploy_io.resumable_deployment(con, plan_id, str(target.name))
    if prepared.diff.is_empty and resumable is None:
        current_id = prepared.current.deployment_id if prepared.current else None
        return RolloutResult(current_id, "unchanged", (), (), (), None, "already deployed")
    deployment_id, render_dir = _start(db_path, prepared, target, out_dir)
    target.write_files(prepared.spec, render_dir)
    target.bind(plan_id, deployment_id)
    with read_connection(db_path) as con:
        done = deploy_io.done_actions(con, deployment_id)
        own = deploy_io.get_deployment(con, deployment_id).external_ids
    run = _Run(db_path, deployment_id, target, prepared, health_checker,
               {**_inherited_ext(prepared), **own}, [], [])  # fmt: skip
    try:
        _apply_all(run, done)
    except HealthCheckFailedError as error:
        return _fail(run, error, on_failure, render_dir)
    _finish(run)
    return RolloutResult(deployment_id, "active", prepared.diff.actions, tuple(run.executed),
                         tuple(run.skipped), render_dir, "deployed")  # fmt: skip


def _inherited_ext(prepared: Prepared) -> dict[str, str]:
    ext = prepared.current.external_ids if prepared.current else {}
    return {d: ext[c] for d, c in prepared.diff.inherited if c in ext}


def _apply_all(run: _Run, done: set[str]) -> None:
    for action in run.prepared.diff.actions:
        if action.action_id in done:
            run.record(action, str(action.kind), action.unit_id, "skipped")
            run.skipped.append(action.action_id)
            continue
        run.record(action, str(action.kind), action.unit_id, "started", action.detail)
        try:
            _apply(run, action)
        except HealthCheckFailedError as error:
            run.record(action, str(action.kind), action.unit_id, "failed", str(error))
            raise
        run.record(action, str(action.kind), action.unit_id, "done")
        run.executed.append(action.action_id)


def _finish(run: _Run) -> None:
    with write_transaction(run.db) as con:
        if run.prepared.current:
            deploy_io.set_deployment_status(con, run.prepared.current.deployment_id, "superseded")
        deploy_io.set_deployment_status(con, run.deployment_id, "active")


def _fail(run: _Run, error: Exception, policy: OnFailure, render_dir: Path) -> RolloutResult:
    actions = run.prepared.diff.actions
    if policy is OnFailure.STOP:
        with write_transaction(run.db) as con:
            deploy_io.set_deployment_status(con, run.deployment_id, "failed")
        return RolloutResult(run.deployment_id, "failed", actions, tuple(run.executed),
                             tuple(run.skipped), render_dir, f"stopped: {error}")  # fmt: skip
    _rollback(run)
    with write_transaction(run.db) as con:
        deploy_io.set_deployment_status(con, run.deployment_id, "rolled_back")
    return RolloutResult(run.deployment_id, "rolled_back", actions, tuple(run.executed),
                         tuple(run.skipped), render_dir, f"rolled back: {error}")  # fmt: skip


def _rollback(run: _Run) -> None:
    """Undo this deployment's applied actions, newest first, back to the previous state."""
    with read_connection(run.db) as con:
        events = deploy_io.rollout_events(con, run.deployment_id)
    touched = [a for a in run.prepared.diff.actions
               if any(e[1] == a.action_id and e[4] in ("started", "done") for e in events)]  # fmt: skip
    for action in reversed(touched):
        _undo(run, action)
        run.record(f"rollback:{action.action_id}", "rollback", action.unit_id, "done")


def _undo(run: _Run, action: Action) -> None:
    spec, current = run.prepared.spec, run.prepared.current
    if action.kind is ActionKind.CREATE:
        unit = _desired(spec, action.unit_id)
        external_id = run.new_ext.get(unit.unit_id) or run.target.find(unit)
        if external_id:
            run.target.delete(unit, external_id)
            run.set_unit(unit.unit_id, "deleted")
    elif action.kind is ActionKind.UPDATE_ROUTER and current is not None:
        old = _desired(current.spec, action.unit_id)
        assert isinstance(old, RouterUnit)
        ext = current.external_ids
        hosts = {e.unit_id: a for e in current.spec.engines
                 if e.unit_id in ext and (a := run.target.address(e, ext[e.unit_id]))}  # fmt: skip
        run.target.update_router(old, current.external_ids[old.unit_id], hosts)
    elif action.kind is ActionKind.FLIP_ROLE and current is not None and action.source_unit_id:
        old_unit = _desired(current.spec, action.source_unit_id)
        assert isinstance(old_unit, EngineUnit)
        router = _router_of(current.spec, old_unit)
        run.target.flip_role(router, current.external_ids[router.unit_id], old_unit)
