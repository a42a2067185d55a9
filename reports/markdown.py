"""Markdown summaries and table rows for Prefect artifacts (the flows create the artifacts).

`plan_markdown(report)` / `history_markdown(report)` feed `create_markdown_artifact(markdown=...)`;
`Table.records()` from `reports.tables` feeds `create_table_artifact(table=...)`.
"""

from __future__ import annotations

from reports.cost import PlanReport
from reports.history import HistoryReport
from reports.tables import Table, Value

PLAN_SECTIONS = ("models", "baselines", "breakdown")
HISTORY_SECTIONS = ("days", "savings", "replans")


def fmt(value: Value, digits: int = 4) -> str:
    """A table cell: floats to `digits` significant figures, None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def markdown_table(table: Table) -> str:
    """A GitHub-flavoured markdown table (pipes in cells escaped)."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |" for row in table.rows]
    return "\n".join([header, rule, *body])


def plan_headline(report: PlanReport) -> list[str]:
    """Bullet lines: cost, $/M tokens, savings, SLOs, solver quality, inventory staleness."""
    plan = report.plan
    lines = [
        f"- **Cost**: ${report.total_usd_per_hr:,.2f}/h on {report.total_gpus} GPUs "
        f"({plan.kind}, {plan.mode} mode, status {plan.status})",
        f"- **$ per million tokens**: {fmt(report.usd_per_million_tokens)}",
    ]
    for b in report.baselines:
        if b.usd_per_hr is None:
            lines.append(f"- **vs {b.kind}**: no cost (baseline plan status {b.status})")
            continue
        lines.append(
            f"- **vs {b.kind}**: baseline ${fmt(b.usd_per_hr)}/h, ratio {fmt(b.ratio, 3)}×, "
            f"savings {percent(b.savings_fraction)}"
        )
    if report.slo_attainment is None:
        lines.append("- **SLO attainment**: no simulation run for this plan")
    else:
        lines.append(
            f"- **SLO attainment**: {percent(report.slo_attainment)}, goodput "
            f"{fmt(report.goodput_req_per_s)} req/s"
        )
    lines.append(f"- **Gap to LP bound**: {percent(report.gap)}, solve {fmt(report.solve_s)} s")
    stale = " — STALE" if report.stale else ""
    lines.append(f"- **Inventory snapshot age**: {fmt(report.snapshot_age_s)} s{stale}")
    return lines


def plan_markdown(report: PlanReport, tables: dict[str, Table]) -> str:
    """The plan report as markdown: headline bullets, then the breakdown tables."""
    title = f"# Cost report for plan `{report.plan.plan_id}`"
    return "\n".join([title, "", *plan_headline(report), "", *_sections(tables, PLAN_SECTIONS)])


def history_markdown(report: HistoryReport, tables: dict[str, Table]) -> str:
    """The history report as markdown; says so plainly when the period holds no plan."""
    title = f"# Cost history {report.since.isoformat()} → {report.until.isoformat()}"
    if report.empty:
        return f"{title}\n\nNo Coral plan was in effect in this period: nothing to report.\n"
    return "\n".join(
        [title, "", *history_headline(report), "", *_sections(tables, HISTORY_SECTIONS)]
    )


def history_headline(report: HistoryReport) -> list[str]:
    """Bullet lines: dollars spent, replans, attainment, savings per baseline kind."""
    if report.empty:
        return ["- No Coral plan was in effect in this period: nothing to report."]
    lines = [
        f"- **Spent**: ${report.total_usd:,.2f} (mean ${fmt(report.mean_usd_per_hr)}/h)",
        f"- **Replans**: {len(report.replans)}",
        f"- **SLO attainment** (hour-weighted, simulated plans): {percent(report.slo_attainment)}",
    ]
    for s in report.savings:
        lines.append(f"- **Saved vs {s.kind}**: ${s.saved_usd:,.2f} (ratio {fmt(s.ratio, 3)}×)")
    return lines


def _sections(tables: dict[str, Table], names: tuple[str, ...]) -> list[str]:
    parts = []
    for name in names:
        if tables[name].rows:
            parts += [f"## {name.capitalize()}", "", markdown_table(tables[name]), ""]
    return parts
