"""Where a replan's demand comes from: a trace, a forecast over a trace's history, or a file.

- trace: the Azure 2023 trace (or any trace CSV) fed to the models with Zipf popularity at a
  total rate; demand = each model's mean rate and token lengths over the whole trace.
- forecast: the same multi-model workload summarised in windows; the next window's rate is
  forecast per model (planning.forecast: Holt smoothing + an empirical-quantile headroom).
- manual: a workload CSV a user wrote (catalog_db.scenarios.load_workload_csv).
SLOs come from the catalog's `workload_classes` for each model's class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from catalog_db.connection import read_connection
from catalog_db.scenarios import load_workload_csv
from catalog_db.traces import load_trace, resolve_trace
from planning.domain import ModelDemand
from planning.forecast import forecast_demands
from planning.workload import ModelSpec, demands, multi_model_workload, summarise


class WorkloadSource(StrEnum):
    TRACE = "trace"
    FORECAST = "forecast"
    MANUAL = "manual"


@dataclass(frozen=True, slots=True)
class DemandRequest:
    """What to build demand from. `models` are in popularity order (Zipf rank 1 first)."""

    source: WorkloadSource
    models: tuple[str, ...] = ()
    workload_class: str = "chat"
    trace: str = "conv"
    total_rate_req_per_s: float = 20.0
    window_s: float = 300.0
    zipf_exponent: float = 1.0
    seed: int = 0
    workload_file: Path | None = None


def model_specs(
    db_path: Path | str, models: Sequence[str], workload_class: str
) -> tuple[ModelSpec, ...]:
    """Specs with the SLOs of `workload_class`; unknown models or class raise KeyError naming them."""
    with read_connection(db_path) as con:
        row = con.execute(
            "SELECT ttft_slo_s, tpot_slo_s FROM workload_classes WHERE workload_class = ?",
            [workload_class],
        ).fetchone()
        known = {r[0] for r in con.execute("SELECT model FROM models").fetchall()}
    if row is None:
        raise KeyError(f"workload_class: unknown class {workload_class!r}")
    unknown = [m for m in models if m not in known]
    if unknown:
        raise KeyError(f"models: unknown model {unknown[0]!r}; see `coral catalog models`")
    return tuple(ModelSpec(m, row[0], row[1], workload_class) for m in models)


def build_demands(db_path: Path | str, request: DemandRequest) -> tuple[ModelDemand, ...]:
    """Demand per model for the next planning window, from the requested source."""
    if request.source is WorkloadSource.MANUAL:
        if request.workload_file is None:
            raise ValueError("workload_file: required when the workload source is 'manual'")
        return load_workload_csv(request.workload_file)
    if not request.models:
        raise ValueError("models: give at least one model for a trace or forecast workload")
    specs = model_specs(db_path, request.models, request.workload_class)
    base = load_trace(resolve_trace(request.trace))
    workload = multi_model_workload(
        base,
        specs,
        request.total_rate_req_per_s,
        base.duration_s,
        request.zipf_exponent,
        request.seed,
    )
    if request.source is WorkloadSource.TRACE:
        return demands(workload)
    return forecast_demands(summarise(workload.trace, request.window_s), specs)
