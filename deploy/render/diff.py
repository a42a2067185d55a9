"""Desired vs current deployment → ordered rollout actions (pure).

Order keeps capacity at or above demand: new engines, then the routers of new groups (which
need their engines' addresses), are created (and health-gated) first; then routers take their new instance lists and FluidPD parameters in
place; then engines flip roles through the router (no restart); only then are surplus
engines drained and deleted, and routers of groups that disappear are deleted last.

Each action's id is `kind:unit_id@spec_hash`: stable for the same change, so a rerun of the
same rollout recognises actions already done.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from deploy.render.units import DeploymentSpec, EngineUnit, RouterUnit, spec_hash


class ActionKind(StrEnum):
    CREATE = "create"
    UPDATE_ROUTER = "update_router"
    FLIP_ROLE = "flip_role"
    DRAIN = "drain"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Action:
    action_id: str
    kind: ActionKind
    unit_id: str
    unit_kind: str  # engine | router
    detail: str
    source_unit_id: str | None = None  # flip_role: the running engine that takes the new role


@dataclass(frozen=True, slots=True)
class Diff:
    actions: tuple[Action, ...]
    kept: tuple[str, ...]  # unit ids running unchanged
    inherited: tuple[tuple[str, str], ...]  # (desired unit id, current unit id) same process

    @property
    def is_empty(self) -> bool:
        return not self.actions


def _action(
    kind: ActionKind, unit: EngineUnit | RouterUnit, detail: str, source: str | None = None
) -> Action:
    unit_kind = "engine" if isinstance(unit, EngineUnit) else "router"
    action_id = f"{kind}:{unit.unit_id}@{spec_hash(unit.to_dict())}"
    return Action(action_id, kind, unit.unit_id, unit_kind, detail, source)


def _flip_key(unit: EngineUnit) -> tuple[object, ...]:
    return (unit.cloud, unit.region, unit.model, unit.pricing, unit.stages)


def _match_flips(
    gone: list[EngineUnit], new: list[EngineUnit]
) -> list[tuple[EngineUnit, EngineUnit]]:
    """Pair a surplus running engine with a wanted engine of the other role on the same
    hardware; both must be flippable (kv_both, single stage). Greedy in unit-id order."""
    pairs = []
    for old in [u for u in gone if u.flippable]:
        for want in new:
            if want.flippable and want.role != old.role and _flip_key(want) == _flip_key(old):
                pairs.append((old, want))
                new.remove(want)
                break
    return pairs


def diff_deployments(current: DeploymentSpec | None, desired: DeploymentSpec) -> Diff:
    """Actions that turn `current` (None: nothing deployed) into `desired`."""
    cur_e = {u.unit_id: u for u in (current.engines if current else ())}
    cur_r = {u.unit_id: u for u in (current.routers if current else ())}
    kept = [u.unit_id for u in desired.engines if cur_e.get(u.unit_id) == u]
    new = [u for u in desired.engines if cur_e.get(u.unit_id) != u]
    gone = [u for u in cur_e.values() if u.unit_id not in kept]
    flips = _match_flips(gone, new)
    flipped_old = {old.unit_id for old, _ in flips}
    gone = [u for u in gone if u.unit_id not in flipped_old]
    actions = [_action(ActionKind.CREATE, u, f"{u.role} on {_machines(u)}") for u in new]
    actions += [_action(ActionKind.CREATE, r, "new router") for r in desired.routers
                if r.unit_id not in cur_r]  # fmt: skip
    actions += [
        _action(ActionKind.UPDATE_ROUTER, r, f"{len(r.instances)} instances, FluidPD params")
        for r in desired.routers
        if r.unit_id in cur_r and cur_r[r.unit_id] != r
    ]
    actions += [
        _action(ActionKind.FLIP_ROLE, want, f"{old.role} -> {want.role}", old.unit_id)
        for old, want in flips
    ]
    actions += [_action(ActionKind.DRAIN, u, "stop new work, finish in-flight") for u in gone]
    actions += [_action(ActionKind.DELETE, u, f"{u.role} on {_machines(u)}") for u in gone]
    desired_routers = {r.unit_id for r in desired.routers}
    actions += [
        _action(ActionKind.DELETE, r, "group no longer served")
        for r in cur_r.values()
        if r.unit_id not in desired_routers
    ]
    inherited = [(k, k) for k in kept] + [(w.unit_id, o.unit_id) for o, w in flips]
    inherited += [(r.unit_id, r.unit_id) for r in desired.routers if r.unit_id in cur_r]
    return Diff(tuple(actions), tuple(kept), tuple(inherited))


def _machines(unit: EngineUnit) -> str:
    return " + ".join(f"{t}({g} GPU)" for t, g in unit.machines)
