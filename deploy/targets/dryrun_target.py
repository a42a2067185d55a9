"""Dry-run target: writes the rendered units as files and records what applying would do.

The `make demo` default: nothing starts; `applied.jsonl` lists each create/update/flip/drain/
delete in order, and `state.json` what would be running (so a rerun finds its units).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deploy.render.units import DeploymentSpec, EngineUnit, RouterUnit, spec_hash, unit_name
from deploy.targets.base_target import TargetName, Unit, register_target


def _incarnation(unit: Unit) -> str:
    return f"{unit_name(unit.unit_id)}@{spec_hash(unit.to_dict())}"


def write_spec_files(spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
    """One JSON per engine (command, env, machines) and per router (its config document)."""
    written = []
    for engine in spec.engines:
        path = out_dir / "engines" / f"{unit_name(engine.unit_id)}.json"
        written.append(_write_json(path, engine.to_dict()))
    for router in spec.routers:
        path = out_dir / "routers" / f"{unit_name(router.unit_id)}.json"
        written.append(_write_json(path, router.config()))
    written.append(_write_json(out_dir / "deployment.json", spec.to_dict()))
    return tuple(written)


def _write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


class DryRunTarget:
    name = TargetName.DRY_RUN
    reachable = False  # health checks can reach its units from here

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)

    @property
    def _state_path(self) -> Path:
        return self.out_dir / "dry-run-state.json"

    def _state(self) -> dict[str, str]:
        if not self._state_path.exists():
            return {}
        return dict(json.loads(self._state_path.read_text(encoding="utf-8")))

    def _log(self, op: str, unit: Unit, **extra: Any) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / "applied.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps({"op": op, "unit_id": unit.unit_id, **extra}) + "\n")

    def bind(self, plan_id: str, deployment_id: str) -> None:
        self.plan_id, self.deployment_id = plan_id, deployment_id

    def check(self, spec: DeploymentSpec) -> None:
        """A dry run can describe any plan."""

    def write_files(self, spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
        return write_spec_files(spec, out_dir)

    def find(self, unit: Unit) -> str | None:
        ext = f"dry-run:{_incarnation(unit)}"
        return ext if ext in self._state() else None

    def create(self, unit: Unit, hosts: dict[str, str]) -> str:
        ext = f"dry-run:{_incarnation(unit)}"
        state = self._state()
        state[ext] = unit.unit_id
        _write_json(self._state_path, state)
        self._log("create", unit, external_id=ext)
        return ext

    def address(self, unit: Unit, external_id: str) -> str | None:
        return None  # nothing runs: health checks are skipped

    def update_router(self, router: RouterUnit, external_id: str, hosts: dict[str, str]) -> None:
        self._log("update_router", router, config=router.config(hosts))

    def flip_role(self, router: RouterUnit, router_id: str, unit: EngineUnit) -> None:
        self._log("flip_role", unit, role=str(unit.role))

    def drain(self, unit: Unit, external_id: str) -> None:
        self._log("drain", unit, external_id=external_id)

    def delete(self, unit: Unit, external_id: str) -> None:
        state = self._state()
        state.pop(external_id, None)
        _write_json(self._state_path, state)
        self._log("delete", unit, external_id=external_id)


@register_target(TargetName.DRY_RUN)
def _make(out_dir: Path, **_: Any) -> DryRunTarget:
    return DryRunTarget(out_dir)
