"""Self-contained HTML reports: plotly charts with plotly.js inlined, plus the report tables.

The file opens offline (no CDN): the first chart carries plotly.js (`include_plotlyjs=True`),
the others reuse it. Div ids are fixed so the same report renders to the same bytes.
A chart without data is replaced by a sentence saying why (`p.no-data`), never left blank.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from html import escape

import plotly.graph_objects as go

from reports.cost import PlanReport
from reports.history import HistoryReport
from reports.markdown import fmt, history_headline, percent, plan_headline
from reports.tables import Table

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f3f3f3; }
.no-data { color: #777; font-style: italic; }
.stale { color: #b00; font-weight: bold; }
"""


def _chart(fig: go.Figure, div_id: str, first: bool) -> str:
    fig.update_layout(height=420, margin={"t": 60, "l": 60, "r": 20, "b": 60})
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=first,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    )


def _charts_html(charts: Sequence[tuple[str, str, go.Figure | str]]) -> str:
    """(div id, heading, figure or no-data sentence) → HTML sections; plotly.js inlined once."""
    parts, first = [], True
    for div_id, heading, fig in charts:
        parts.append(f"<h2>{escape(heading)}</h2>")
        if isinstance(fig, str):
            parts.append(f'<p class="no-data" id="{div_id}-none">{escape(fig)}</p>')
        else:
            parts.append(_chart(fig, div_id, first))
            first = False
    return "\n".join(parts)


def table_html(table: Table) -> str:
    """An HTML table; floats at 4 significant figures, None as an em dash."""
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(fmt(v))}</td>" for v in row) + "</tr>" for row in table.rows
    )
    return f'<table class="report-table" id="table-{escape(table.name)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _headline_item(markdown_line: str) -> str:
    """A markdown bullet ("- **Cost**: ...") as an HTML list item, escaped."""
    text = escape(markdown_line.removeprefix("- "))
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    css = ' class="stale"' if "STALE" in text else ""
    return f"<li{css}>{text}</li>"


def _page(title: str, headline: Sequence[str], body: str) -> str:
    items = "".join(_headline_item(line) for line in headline)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f'<body><h1>{escape(title)}</h1><ul class="headline">{items}</ul>\n{body}\n</body></html>\n'
    )


def _tables_html(tables: dict[str, Table], names: Sequence[str]) -> str:
    parts = []
    for name in names:
        table = tables[name]
        parts.append(f"<h2>Table: {escape(name)}</h2>")
        parts.append(table_html(table) if table.rows else '<p class="no-data">No rows.</p>')
    return "\n".join(parts)


def gpu_stack_figure(report: PlanReport) -> go.Figure | str:
    """Stacked $/h by GPU type, one bar per region and pricing class."""
    if not report.pools:
        return "The plan rents no machines."
    fig = go.Figure()
    for gpu in sorted({p.gpu_type for p in report.pools}):
        pools = [p for p in report.pools if p.gpu_type == gpu]
        fig.add_bar(
            name=gpu,
            x=[f"{p.cloud}/{p.region} ({p.pricing})" for p in pools],
            y=[p.usd_per_hr for p in pools],
            customdata=[p.gpus for p in pools],
            hovertemplate="%{y:.2f} $/h on %{customdata} GPUs",
        )
    fig.update_layout(barmode="stack", title="$/h by GPU type", yaxis_title="$/h")
    return fig


def model_figure(report: PlanReport) -> go.Figure | str:
    """Attributed $/h per model, with $ per million tokens in the hover text."""
    if not report.models:
        return "No template instances in this plan."
    fig = go.Figure(
        go.Bar(
            x=[m.model for m in report.models],
            y=[m.usd_per_hr for m in report.models],
            text=[fmt(m.usd_per_million_tokens) + " $/M tok" for m in report.models],
        )
    )
    fig.update_layout(title="$/h by model (label: $ per million tokens)", yaxis_title="$/h")
    return fig


def baseline_figure(report: PlanReport) -> go.Figure | str:
    """Coral's $/h beside each feasible baseline's, labelled with baseline/Coral ratios."""
    feasible = [b for b in report.baselines if b.usd_per_hr is not None]
    if not feasible:
        return "No feasible baseline plan recorded for this plan."
    names = ["coral", *[b.kind for b in feasible]]
    costs = [report.total_usd_per_hr, *[b.usd_per_hr for b in feasible]]
    labels = [
        "1×",
        *[f"{fmt(b.ratio, 3)}× ({percent(b.savings_fraction)} saved)" for b in feasible],
    ]
    fig = go.Figure(go.Bar(x=names, y=costs, text=labels))
    fig.update_layout(title="Coral vs baselines ($/h, same inputs)", yaxis_title="$/h")
    return fig


def attainment_figure(report: PlanReport) -> go.Figure | str:
    """SLO attainment against offered load, one line per plan kind and router policy."""
    points = [
        s
        for s in report.sims
        if s.offered_load_req_per_s is not None and s.slo_attainment is not None
    ]
    if not points:
        return "No simulation run for this plan: SLO attainment is unknown."
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in points:
        series[f"{s.plan_kind} / {s.policy}"].append((s.offered_load_req_per_s, s.slo_attainment))  # type: ignore[arg-type]
    fig = go.Figure()
    for name in sorted(series):
        xs, ys = zip(*sorted(series[name]), strict=True)
        fig.add_scatter(name=name, x=list(xs), y=list(ys), mode="lines+markers")
    fig.update_layout(
        title="SLO attainment vs offered load",
        xaxis_title="offered load (req/s)",
        yaxis_title="SLO attainment",
        yaxis_range=[0, 1.05],
    )
    return fig


def plan_html(report: PlanReport, tables: dict[str, Table]) -> str:
    """The whole per-plan HTML document."""
    charts = _charts_html(
        [
            ("chart-gpu-stack", "Where the money goes", gpu_stack_figure(report)),
            ("chart-models", "Cost per model", model_figure(report)),
            ("chart-baselines", "Savings vs baselines", baseline_figure(report)),
            ("chart-attainment", "SLO attainment vs load", attainment_figure(report)),
        ]
    )
    body = charts + "\n" + _tables_html(tables, list(tables))
    title = f"Coral cost report — plan {report.plan.plan_id}"
    return _page(title, plan_headline(report), body)


def history_gpu_figure(report: HistoryReport) -> go.Figure | str:
    """Stacked $/h by GPU type, one bar per replan."""
    if not report.replans:
        return "No replans in this period."
    fig = go.Figure()
    gpus = sorted({g for r in report.replans for g in r.usd_per_hr_by_gpu})
    for gpu in gpus:
        fig.add_bar(
            name=gpu,
            x=[r.created_at.isoformat() for r in report.replans],
            y=[r.usd_per_hr_by_gpu.get(gpu, 0.0) for r in report.replans],
        )
    fig.update_layout(barmode="stack", title="$/h by GPU type per replan", yaxis_title="$/h")
    return fig


def history_savings_figure(report: HistoryReport) -> go.Figure | str:
    """Cumulative dollars saved against each baseline kind."""
    if not report.cumulative:
        return "No baseline plans in this period."
    fig = go.Figure()
    for kind in sorted({p.kind for p in report.cumulative}):
        pts = [p for p in report.cumulative if p.kind == kind]
        fig.add_scatter(
            name=kind, x=[p.at.isoformat() for p in pts], y=[p.saved_usd for p in pts],
            mode="lines+markers",
        )  # fmt: skip
    fig.update_layout(title="Savings to date vs baselines ($)", yaxis_title="$ saved")
    return fig


def history_attainment_figure(report: HistoryReport) -> go.Figure | str:
    """SLO attainment and $/h per replan over time."""
    simulated = [r for r in report.replans if r.slo_attainment is not None]
    if not simulated:
        return "No simulation runs for the plans of this period."
    fig = go.Figure()
    fig.add_scatter(
        name="SLO attainment",
        x=[r.created_at.isoformat() for r in simulated],
        y=[r.slo_attainment for r in simulated],
        mode="lines+markers",
    )
    fig.update_layout(title="SLO attainment per replan", yaxis_title="SLO attainment",
                      yaxis_range=[0, 1.05])  # fmt: skip
    return fig


def history_html(report: HistoryReport, tables: dict[str, Table]) -> str:
    """The whole over-time HTML document; an empty period says so and has no charts."""
    title = f"Coral cost history {report.since.isoformat()} → {report.until.isoformat()}"
    if report.empty:
        body = '<p class="no-data" id="empty-history">No Coral plan was in effect in this period: nothing to report.</p>'
        return _page(title, [], body)
    charts = _charts_html(
        [
            ("chart-history-gpu", "Cost per replan by GPU type", history_gpu_figure(report)),
            ("chart-history-savings", "Savings vs baselines", history_savings_figure(report)),
            ("chart-history-attainment", "SLO attainment", history_attainment_figure(report)),
        ]
    )
    body = charts + "\n" + _tables_html(tables, list(tables))
    return _page(title, history_headline(report), body)
