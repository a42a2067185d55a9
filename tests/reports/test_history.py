"""Pure over-time computations: accounting segments, day splits, churn, savings, periods."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from reports.history import (
    HistoryInputs,
    HistoryPlan,
    churn,
    history_report,
    parse_since,
)
from reports.html import history_html
from reports.markdown import history_markdown
from reports.tables import history_tables

T0 = datetime(2026, 1, 1)


def _plan(
    pid: str, hours: float, usd: float, base: float | None = None, **instances: int
) -> HistoryPlan:
    return HistoryPlan(
        pid, T0 + timedelta(hours=hours), usd, {"H100": usd}, {"homogeneous": base} if base else {},
        None, None, {(k, "aws", "r", "on_demand"): v for k, v in instances.items()},
    )  # fmt: skip


def test_churn_counts_added_and_removed_instances():
    old = {("t1", "c", "r", "p"): 3, ("t2", "c", "r", "p"): 1}
    new = {("t1", "c", "r", "p"): 1, ("t3", "c", "r", "p"): 4}
    assert churn(old, new) == (4, 2 + 1)


def test_plans_are_in_effect_until_the_next_and_split_at_midnight():
    inputs = HistoryInputs(
        since=T0 + timedelta(hours=20),
        until=T0 + timedelta(hours=30),
        prior=_plan("a", 0, 10.0, t=1),
        plans=(_plan("b", 22, 20.0, 40.0, t=2),),
    )
    report = history_report(inputs)
    assert [(s.plan.plan_id, s.hours) for s in report.segments] == [("a", 2.0), ("b", 8.0)]
    days = {d.day: d for d in report.days}
    assert days[T0.date()].usd == 2 * 10.0 + 2 * 20.0
    assert days[(T0 + timedelta(days=1)).date()].usd == 6 * 20.0
    assert report.total_usd == 2 * 10.0 + 8 * 20.0
    (saving,) = report.savings
    assert (saving.saved_usd, saving.ratio) == (8 * (40.0 - 20.0), 40.0 / 20.0)
    (replan,) = report.replans
    assert (replan.added, replan.removed) == (1, 0)


def test_empty_period_reports_empty_and_renders():
    inputs = HistoryInputs(T0, T0 + timedelta(days=7), None, ())
    report = history_report(inputs)
    assert report.empty and report.total_usd == 0 and report.mean_usd_per_hr is None
    tables = history_tables(report)
    assert "nothing to report" in history_markdown(report, tables)
    html = history_html(report, tables)
    assert "nothing to report" in html and "plotly-graph-div" not in html


@pytest.mark.parametrize(
    ("text", "expected"),
    [("7d", timedelta(days=7)), ("12h", timedelta(hours=12)), ("30m", timedelta(minutes=30)),
     ("2w", timedelta(weeks=2))],
)  # fmt: skip
def test_parse_since_periods(text, expected):
    until = T0 + timedelta(days=30)
    assert parse_since(text, until) == until - expected


def test_parse_since_dates_and_errors():
    assert parse_since("2026-01-02", T0) == datetime(2026, 1, 2)
    assert parse_since(timedelta(hours=1), T0) == T0 - timedelta(hours=1)
    with pytest.raises(ValueError, match="cannot read --since"):
        parse_since("yesterday-ish", T0)
