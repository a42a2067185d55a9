"""Reports against a real catalog: numbers recomputed here from the inserted rows by hand."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from catalog_db.connection import write_transaction
from catalog_db.reports_io import build_history_report, build_plan_report
from tests.reports import catalog_rows as rows
from tests.reports.catalog_rows import (
    insert_assignment,
    insert_plan,
    insert_rental,
    insert_sim,
    seed_plan,
)


def _expected_model_costs() -> dict[str, float]:
    """Pool rule by hand: each (cloud, region, pricing, GPU type) pool's $/h split by GPUs used."""
    pool_usd: dict[tuple, float] = {}
    for cloud, region, _, pricing, gpu, _, count, price in rows.RENTALS:
        key = (cloud, region, pricing, gpu)
        pool_usd[key] = pool_usd.get(key, 0.0) + count * price
    used: dict[tuple, dict[str, int]] = {}
    for tid, cloud, region, pricing, count in rows.ASSIGNMENTS:
        model, _, gpus, _ = rows.TEMPLATES[tid]
        for gpu, n in gpus.items():
            pool = used.setdefault((cloud, region, pricing, gpu), {})
            pool[model] = pool.get(model, 0) + count * n
    expected: dict[str, float] = {}
    for key, usd in pool_usd.items():
        total = sum(used[key].values())
        for model, n in used[key].items():
            expected[model] = expected.get(model, 0.0) + usd * n / total
    return expected


def _expected_tokens_per_hr() -> dict[str, float]:
    tokens: dict[str, float] = {}
    for model, _, pd_rate, coloc in rows.DEMAND:
        tin, tout = rows.WORKLOAD_TOKENS[model]
        tokens[model] = tokens.get(model, 0.0) + (pd_rate + coloc) * (tin + tout) * 3600
    return tokens


def _items(db: Path, report_id: str) -> dict[tuple[str, str], tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        found = con.execute(
            "SELECT dimension, key, usd_per_hr, ratio FROM cost_report_items WHERE report_id = ?",
            [report_id],
        ).fetchall()
    return {(d, k): (usd, ratio) for d, k, usd, ratio in found}


def _report_row(db: Path, report_id: str) -> dict:
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute("SELECT * FROM cost_reports WHERE report_id = ?", [report_id])
        names = [d[0] for d in cursor.description]
        row = cursor.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


def test_plan_report_numbers_equal_a_recomputation_from_plan_rows(catalog_path, tmp_path):
    seed_plan(catalog_path)
    result = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out")

    total = sum(count * price for *_, count, price in rows.RENTALS)
    tokens = _expected_tokens_per_hr()
    model_usd = _expected_model_costs()
    row = _report_row(catalog_path, result.report_id)
    assert row["plan_id"] == rows.PLAN_ID
    assert row["total_usd_per_hr"] == pytest.approx(total)
    assert row["usd_per_million_tokens"] == pytest.approx(total / (sum(tokens.values()) / 1e6))
    # latest Coral simulation by created_at
    coral_sims = [s for s in rows.SIM_RUNS if s[1] == "coral"]
    latest = max(coral_sims, key=lambda s: s[3])
    assert row["slo_attainment"] == pytest.approx(latest[6])
    assert row["goodput_req_per_s"] == pytest.approx(latest[7])
    assert row["snapshot_age_s"] == pytest.approx(rows.PLAN_META["age_s"])
    summary = json.loads(row["summary"])
    meta = rows.PLAN_META
    assert summary["gap"] == pytest.approx(
        (meta["objective"] - meta["lp_bound"]) / meta["objective"]
    )
    assert summary["solve_s"] == pytest.approx(meta["solve_s"])
    assert summary["stale"] is True
    for model, usd in model_usd.items():
        per_m = summary["usd_per_million_tokens_by_model"][model]
        assert per_m == pytest.approx(usd / (tokens[model] / 1e6))

    items = _items(catalog_path, result.report_id)
    for model, usd in model_usd.items():
        assert items[("model", model)][0] == pytest.approx(usd)
    assert sum(model_usd.values()) == pytest.approx(total)
    by_gpu: dict[str, float] = {}
    for _, _, _, _, gpu, _, count, price in rows.RENTALS:
        by_gpu[gpu] = by_gpu.get(gpu, 0.0) + count * price
    for gpu, usd in by_gpu.items():
        assert items[("gpu_type", gpu)] == pytest.approx((usd, usd / total))
    spot = sum(r[6] * r[7] for r in rows.RENTALS if r[3] == "spot")
    assert items[("pricing", "spot")][0] == pytest.approx(spot)
    assert items[("pricing", "on_demand")][0] == pytest.approx(total - spot)
    west = sum(r[6] * r[7] for r in rows.RENTALS if r[1] == "us-west-2")
    assert items[("region", "us-west-2")][0] == pytest.approx(west)

    # baselines: recorded cost, cost from rentals, infeasible → no ratio
    homogeneous = rows.BASELINES["homogeneous"][1]
    assert items[("baseline", "homogeneous")] == pytest.approx((homogeneous, homogeneous / total))
    melange = sum(r[6] * r[7] for r in rows.BASELINES["melange"][2])
    assert items[("baseline", "melange")] == pytest.approx((melange, melange / total))
    assert items[("baseline", "homogeneous_pd")] == (None, None)


def test_plan_report_files_and_artifact_content(catalog_path, tmp_path):
    seed_plan(catalog_path)
    result = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out")
    html = result.html_path.read_text(encoding="utf-8")
    assert html.count('class="plotly-graph-div"') == 4
    assert "cdn.plot.ly" not in html.split("<body>")[0]  # plotly.js is inlined, not fetched
    models_csv = pd.read_csv(result.csv_paths["models"])
    models_parquet = pd.read_parquet(result.parquet_paths["models"])
    expected = _expected_model_costs()
    for frame in (models_csv, models_parquet):
        got = dict(zip(frame["model"], frame["usd_per_hr"], strict=True))
        assert got == pytest.approx(expected)
    assert {r["model"] for r in result.table_rows} == set(expected)
    assert rows.PLAN_ID in result.markdown and "| model |" in result.markdown


def test_rerun_replaces_rows_instead_of_duplicating(catalog_path, tmp_path):
    seed_plan(catalog_path)
    first = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out")
    before = _items(catalog_path, first.report_id)
    second = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out")
    assert second.report_id == first.report_id
    with duckdb.connect(str(catalog_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM cost_reports").fetchone() == (1,)
        n_items = con.execute("SELECT count(*) FROM cost_report_items").fetchone()
    assert n_items == (len(before),)


def test_plan_without_simulation_or_baselines_still_reports(catalog_path, tmp_path):
    seed_plan(catalog_path, with_sims=False, with_baselines=False)
    result = build_plan_report(catalog_path, rows.PLAN_ID, tmp_path / "out")
    row = _report_row(catalog_path, result.report_id)
    assert row["slo_attainment"] is None and row["goodput_req_per_s"] is None
    html = result.html_path.read_text(encoding="utf-8")
    assert "No simulation run for this plan" in html
    assert "No feasible baseline plan" in html
    assert html.count('class="plotly-graph-div"') == 2
    assert "no simulation run" in result.markdown


def test_unknown_plan_is_a_clear_error(catalog_path, tmp_path):
    with pytest.raises(KeyError, match="no plan 'nope'"):
        build_plan_report(catalog_path, "nope", tmp_path / "out")


# History ------------------------------------------------------------------------------------

DAY1 = datetime(2026, 11, 1)
# (plan_id, created_at, $/h, status, homogeneous baseline $/h or None, attainment or None,
#  assignments {template: count})
HISTORY = [
    ("c0", DAY1 - timedelta(hours=4), 8.0, "optimal", None, None, {"t1": 2}),
    ("c1", DAY1 + timedelta(hours=3), 10.0, "optimal", 30.0, 0.90, {"t1": 3, "t2": 1}),
    ("c2", DAY1 + timedelta(hours=12), 20.0, "optimal", 25.0, 0.95, {"t2": 1}),
    ("cx", DAY1 + timedelta(hours=18), 99.0, "infeasible", None, None, {}),
    ("c3", DAY1 + timedelta(hours=30), 15.0, "optimal", None, None, {"t1": 1, "t2": 2}),
]
SINCE, UNTIL = DAY1, DAY1 + timedelta(hours=36)


def _seed_history(db: Path) -> None:
    with write_transaction(db) as con:
        for plan_id, at, usd, status, base, att, assigned in HISTORY:
            insert_plan(con, plan_id, "coral", at, status=status, cost=usd)
            insert_rental(con, plan_id, ("aws", "us-east-1", "x", "on_demand", "L4", 1, 1, usd))
            for tid, count in assigned.items():
                insert_assignment(con, plan_id, tid, "aws", "us-east-1", "on_demand", count)
            if base is not None:
                insert_plan(con, f"{plan_id}-h", "homogeneous", at, cost=base, parent=plan_id)
            if att is not None:
                insert_sim(con, f"sim-{plan_id}", plan_id, "fluidpd", at, 100, 10.0, att, 9.0)


def _in_effect() -> list[tuple[str, datetime, datetime, float, float | None, float | None]]:
    feasible = [h for h in HISTORY if h[3] != "infeasible"]
    spans = []
    for i, (pid, at, usd, _, base, att, _) in enumerate(feasible):
        end = feasible[i + 1][1] if i + 1 < len(feasible) else UNTIL
        start, end = max(at, SINCE), min(end, UNTIL)
        if end > start:
            spans.append((pid, start, end, usd, base, att))
    return spans


def test_history_numbers_equal_a_recomputation(catalog_path, tmp_path):
    _seed_history(catalog_path)
    result = build_history_report(catalog_path, SINCE, tmp_path / "out", until=UNTIL)
    assert not result.empty
    spans = _in_effect()
    hours = lambda s, e: (e - s).total_seconds() / 3600  # noqa: E731
    total_usd = sum(hours(s, e) * usd for _, s, e, usd, _, _ in spans)
    total_h = sum(hours(s, e) for _, s, e, *_ in spans)
    row = _report_row(catalog_path, result.report_id)
    assert row["total_usd_per_hr"] == pytest.approx(total_usd / total_h)
    summary = json.loads(row["summary"])
    assert summary["total_usd"] == pytest.approx(total_usd)
    saved = sum(hours(s, e) * (base - usd) for _, s, e, usd, base, _ in spans if base)
    assert summary["saved_usd"]["homogeneous"] == pytest.approx(saved)
    # churn: instance differences between consecutive feasible plans, first in window vs prior
    feasible = [h for h in HISTORY if h[3] != "infeasible"]
    churn = 0
    for old, new in itertools.pairwise(feasible):
        keys = set(old[6]) | set(new[6])
        churn += sum(abs(new[6].get(k, 0) - old[6].get(k, 0)) for k in keys)
    assert summary["churn"] == churn
    assert summary["replans"] == 3

    days = {d["day"]: d for d in result.table_rows}
    day1_usd = day1_h = att_num = att_h = 0.0
    for _, s, e, usd, _, att in spans:
        s1, e1 = max(s, DAY1), min(e, DAY1 + timedelta(days=1))
        if e1 > s1:
            day1_usd += hours(s1, e1) * usd
            day1_h += hours(s1, e1)
            if att is not None:
                att_num += hours(s1, e1) * att
                att_h += hours(s1, e1)
    assert days[DAY1.date().isoformat()]["usd"] == pytest.approx(day1_usd)
    assert days[DAY1.date().isoformat()]["slo_attainment"] == pytest.approx(att_num / att_h)
    assert sum(d["usd"] for d in days.values()) == pytest.approx(total_usd)
    items = _items(catalog_path, result.report_id)
    assert items[("plan", "c2")][0] == pytest.approx(20.0)
    assert ("plan", "cx") not in items


def test_history_rerun_uses_the_same_report_id(catalog_path, tmp_path):
    _seed_history(catalog_path)
    a = build_history_report(catalog_path, SINCE, tmp_path / "out", until=UNTIL)
    b = build_history_report(catalog_path, "36h", tmp_path / "out", until=UNTIL)
    assert a.report_id == b.report_id
    with duckdb.connect(str(catalog_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM cost_reports").fetchone() == (1,)


def test_empty_history_says_so(catalog_path, tmp_path):
    result = build_history_report(catalog_path, "7d", tmp_path / "out")
    assert result.empty
    assert "nothing to report" in result.markdown
    assert "nothing to report" in result.html_path.read_text(encoding="utf-8")
    assert result.table_rows == []
    row = _report_row(catalog_path, result.report_id)
    assert json.loads(row["summary"])["empty"] is True
