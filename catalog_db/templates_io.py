"""Serving templates in the catalog: rebuild a template set from profiles, read it back.

`rebuild_templates(db_path, params)` reads models, GPU types, workload classes and profiles
(short read-only connection), builds the templates with the pure
`planning.templates.build.build_templates` (no lock held), then writes the new set in ONE
`write_transaction`: the `template_sets` row, every `templates` and `template_gpus` row, then
`is_current` flipped to the new set. Readers see the old set or the new one, never a mix; an
error anywhere rolls the whole write back and the old set stays current.

Identity and idempotency. `template_id` is a stable hash of model, phase, class and stages
(`planning.templates.build.template_id`); the set id is a hash of the set's content (ids,
ratings, provenance) and the build parameters. Rebuilding from the same profiles gives the same
set id and writes nothing (`changed=False`).

One set's rows at a time. The schema keys `templates` and `template_gpus` by `template_id`
alone, so the same template cannot appear in two sets: a rebuild replaces the previous set's
rows inside the same transaction, and `template_sets` keeps the history of counts and params.
(Keeping old sets' rows would need the key (template_set_id, template_id).)

Partial rebuild: with `models=[...]`, those models are rebuilt and every other model's
current templates are carried into the new set unchanged.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from catalog_db import queries
from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import read_points
from planning.domain import GpuType, ModelArch, Phase, ProfilePoint, Stage, Template, WorkloadClass
from planning.perf_table import build_tables
from planning.templates.build import GroupCounts, build_templates
from planning.templates.params import TemplateParams


class NoProfilesError(ValueError):
    """A model asked for (or the whole catalog) has no profile rows to build templates from."""


@dataclass(frozen=True, slots=True)
class TemplateBuildSummary:
    """What one rebuild did: the current set, whether it changed, and the search counts."""

    template_set_id: str
    changed: bool
    models: tuple[str, ...]  # rebuilt from profiles
    carried_over_models: tuple[str, ...]  # partial rebuild: kept from the previous set
    models_without_profiles: tuple[str, ...]  # skipped (only when no model list was given)
    enumerated: int
    evaluated: int
    kept: int  # templates in the new set, carried-over ones included
    counts: tuple[GroupCounts, ...]
    build_s: float


@dataclass(frozen=True, slots=True)
class BuildInputs:
    """Everything a build reads from the catalog."""

    models: tuple[ModelArch, ...]
    gpus: tuple[GpuType, ...]
    classes: tuple[WorkloadClass, ...]
    points: tuple[ProfilePoint, ...]
    without_profiles: tuple[str, ...]


def workload_classes(con: duckdb.DuckDBPyConnection) -> tuple[WorkloadClass, ...]:
    rows = con.execute(
        "SELECT workload_class, input_tokens, output_tokens, ttft_slo_s, tpot_slo_s "
        "FROM workload_classes ORDER BY workload_class"
    ).fetchall()
    return tuple(WorkloadClass(*row) for row in rows)


def reference_gpu_prices(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Cheapest on-demand $/GPU-hour per GPU type (the `gpu_prices` view)."""
    rows = con.execute(
        "SELECT gpu_type, ondemand_usd_per_gpu_hr FROM gpu_prices "
        "WHERE ondemand_usd_per_gpu_hr IS NOT NULL"
    ).fetchall()
    return {gpu: float(price) for gpu, price in rows}


def load_build_inputs(
    con: duckdb.DuckDBPyConnection, models: Sequence[str] | None = None
) -> BuildInputs:
    """Models (all, or the named ones: unknown names raise KeyError), GPUs, classes, profiles.

    A named model without profiles raises NoProfilesError; with no names, such models are
    skipped and listed in `without_profiles`.
    """
    archs = (
        tuple(queries.model(con, name) for name in models)
        if models is not None
        else queries.models(con)
    )
    points: list[ProfilePoint] = []
    with_points: list[ModelArch] = []
    missing: list[str] = []
    for arch in archs:
        mine = read_points(con, model=arch.model)
        if mine:
            points.extend(mine)
            with_points.append(arch)
        else:
            missing.append(arch.model)
    if models is not None and missing:
        raise NoProfilesError(
            f"no profiles for model {missing[0]!r}; run `coral profile` for it first"
        )
    if not with_points:
        raise NoProfilesError("no profiles in the catalog; run `coral profile` first")
    return BuildInputs(
        tuple(with_points), queries.gpu_types(con), workload_classes(con), tuple(points),
        tuple(missing),
    )  # fmt: skip


def ref_cost_usd_per_hr(template: Template, prices: dict[str, float]) -> float | None:
    """$/h of the template's GPUs at reference prices; None if a GPU type has no price."""
    vector = template.gpu_vector
    if any(g not in prices for g in vector):
        return None
    return sum(n * prices[g] for g, n in vector.items())


def rebuild_templates(
    db_path: Path | str,
    params: TemplateParams | None = None,
    models: Sequence[str] | None = None,
    timeout_s: float = 60.0,
) -> TemplateBuildSummary:
    """Rebuild the current template set from the catalog's profiles (see module docstring)."""
    params = params or TemplateParams()
    with read_connection(db_path, timeout_s) as con:
        inputs = load_build_inputs(con, models)
        carried = _carried_over(con, models)
    started = time.perf_counter()
    build = build_templates(
        inputs.models, inputs.gpus, inputs.classes, build_tables(inputs.points), params
    )
    build_s = time.perf_counter() - started
    templates = tuple(build.templates) + carried
    carried_models = tuple(sorted({t.model for t in carried}))
    set_id = template_set_id(templates, params)
    meta = {
        "params": params.to_json_dict(),
        "models": [m.model for m in inputs.models],
        "carried_over_models": list(carried_models),
        "models_without_profiles": list(inputs.without_profiles),
        "counts": [_counts_json(c) for c in build.counts],
        "build_s": round(build_s, 3),
    }
    with write_transaction(db_path, timeout_s) as con:
        changed = _current_set_id(con) != set_id
        if changed:
            _write_set(con, set_id, templates, build.enumerated, build.evaluated, meta)
    return TemplateBuildSummary(
        template_set_id=set_id,
        changed=changed,
        models=tuple(m.model for m in inputs.models),
        carried_over_models=carried_models,
        models_without_profiles=inputs.without_profiles,
        enumerated=build.enumerated,
        evaluated=build.evaluated,
        kept=len(templates),
        counts=build.counts,
        build_s=build_s,
    )


def template_set_id(templates: Sequence[Template], params: TemplateParams) -> str:
    """Hash of the set's content and parameters: equal inputs give an equal id."""
    digest = hashlib.sha256(json.dumps(params.to_json_dict(), sort_keys=True).encode())
    for t in sorted(templates, key=lambda t: t.template_id):
        digest.update(
            json.dumps(
                [t.template_id, t.throughput_tokens_per_s, t.throughput_req_per_s, t.latency_s,
                 t.max_batch, t.profile_backend, t.profile_backend_version]
            ).encode()
        )  # fmt: skip
    return digest.hexdigest()[:16]


def _counts_json(c: GroupCounts) -> dict[str, object]:
    return {
        "model": c.model,
        "phase": str(c.phase),
        "workload_class": c.workload_class,
        "stage_shapes": c.stage_shapes,
        "unrestricted": c.unrestricted,
        "enumerated": c.enumerated,
        "evaluated": c.evaluated,
        "feasible": c.feasible,
        "kept": c.kept,
    }


def _carried_over(
    con: duckdb.DuckDBPyConnection, models: Sequence[str] | None
) -> tuple[Template, ...]:
    if models is None:
        return ()
    return tuple(t for t in current_templates(con) if t.model not in set(models))


def _current_set_id(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute(
        "SELECT template_set_id FROM template_sets WHERE is_current LIMIT 1"
    ).fetchone()
    return None if row is None else str(row[0])


def _write_set(
    con: duckdb.DuckDBPyConnection,
    set_id: str,
    templates: Sequence[Template],
    enumerated: int,
    evaluated: int,
    meta: dict[str, object],
) -> None:
    """Insert the set and its rows, then make it the only current set (caller's transaction)."""
    prices = reference_gpu_prices(con)
    now = datetime.now(UTC).replace(tzinfo=None)
    con.execute("DELETE FROM template_gpus")
    con.execute("DELETE FROM templates")
    con.execute("DELETE FROM template_sets WHERE template_set_id = ?", [set_id])
    con.execute(
        "INSERT INTO template_sets (template_set_id, generated_at, is_current, enumerated, "
        "evaluated, kept, params) VALUES (?, ?, false, ?, ?, ?, ?)",
        [set_id, now, enumerated, evaluated, len(templates), json.dumps(meta)],
    )
    _insert_frame(con, "templates", _templates_frame(set_id, templates, prices, now))
    _insert_frame(con, "template_gpus", _gpus_frame(templates))
    con.execute("UPDATE template_sets SET is_current = (template_set_id = ?)", [set_id])


def _insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    if frame.empty:
        return
    con.register("_coral_templates_in", frame)
    try:
        columns = ", ".join(frame.columns)
        con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM _coral_templates_in")
    finally:
        con.unregister("_coral_templates_in")


def _templates_frame(
    set_id: str, templates: Sequence[Template], prices: dict[str, float], now: datetime
) -> pd.DataFrame:
    rows = [
        {
            "template_id": t.template_id,
            "template_set_id": set_id,
            "model": t.model,
            "phase": str(t.phase),
            "workload_class": t.workload_class,
            "num_stages": len(t.stages),
            "stages": json.dumps(
                [{"gpu_type": s.gpu_type, "tp": s.tp, "num_layers": s.num_layers} for s in t.stages]
            ),
            "total_gpus": t.total_gpus,
            "throughput_tokens_per_s": t.throughput_tokens_per_s,
            "throughput_req_per_s": t.throughput_req_per_s,
            "latency_s": t.latency_s,
            "max_batch": t.max_batch,
            "ref_cost_usd_per_hr": ref_cost_usd_per_hr(t, prices),
            "pp_layer_partition": t.pp_layer_partition,
            "profile_backend": t.profile_backend,
            "profile_backend_version": t.profile_backend_version,
            "generated_at": now,
        }
        for t in templates
    ]
    return (
        pd.DataFrame(rows).astype(
            {"throughput_req_per_s": "float64", "ref_cost_usd_per_hr": "float64"}
        )
        if rows
        else pd.DataFrame()
    )


def _gpus_frame(templates: Sequence[Template]) -> pd.DataFrame:
    rows = [
        {"template_id": t.template_id, "gpu_type": g, "gpu_count": n}
        for t in templates
        for g, n in sorted(t.gpu_vector.items())
    ]
    return pd.DataFrame(rows)


_TEMPLATE_COLUMNS = (
    "t.template_id, t.model, t.phase, t.workload_class, t.stages, t.throughput_tokens_per_s, "
    "t.throughput_req_per_s, t.latency_s, t.max_batch, t.profile_backend, "
    "t.profile_backend_version"
)


def current_templates(
    con: duckdb.DuckDBPyConnection, models: Sequence[str] | None = None
) -> tuple[Template, ...]:
    """Templates of the current set (of `models`, or all), ordered by model, phase, class,
    GPUs. Empty when no set was built yet."""
    rows = con.execute(
        f"SELECT {_TEMPLATE_COLUMNS} FROM templates t "
        "JOIN template_sets s ON s.template_set_id = t.template_set_id AND s.is_current "
        "WHERE ?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], t.model) "
        "ORDER BY t.model, t.phase, t.workload_class, t.total_gpus, t.template_id",
        [None if models is None else list(models)] * 2,
    ).fetchall()
    return tuple(_template(row) for row in rows)


def parse_stages(stages_json: Any) -> tuple[Stage, ...]:
    """The `templates.stages` column (JSON text or already-decoded list) as Stage values."""
    items = json.loads(stages_json) if isinstance(stages_json, str) else stages_json
    return tuple(Stage(s["gpu_type"], int(s["tp"]), int(s["num_layers"])) for s in items)


def _template(row: tuple) -> Template:
    (tid, model, phase, wclass, stages, tokens, reqs, latency, batch, backend, version) = row
    return Template(
        template_id=tid,
        model=model,
        phase=Phase(phase),
        workload_class=wclass,
        stages=parse_stages(stages),
        throughput_tokens_per_s=tokens,
        throughput_req_per_s=reqs,
        latency_s=latency,
        max_batch=batch,
        profile_backend=backend,
        profile_backend_version=version,
    )


def current_template_set(con: duckdb.DuckDBPyConnection) -> dict[str, object] | None:
    """The current set's row (id, generated_at, counts, params) or None if none was built."""
    cursor = con.execute(
        "SELECT template_set_id, generated_at, enumerated, evaluated, kept, params "
        "FROM template_sets WHERE is_current"
    )
    row = cursor.fetchone()
    if row is None:
        return None
    names = [d[0] for d in cursor.description or ()]
    record = dict(zip(names, row, strict=True))
    record["params"] = json.loads(str(record["params"])) if record["params"] else None
    return record
