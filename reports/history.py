"""Cost and SLO attainment over time: pure arithmetic over the Coral plans of a period.

Accounting rule: a feasible Coral plan is *in effect* from its `created_at` until the next
feasible Coral plan's `created_at` (the last one until the period end). The plan in effect when
the period starts (the last one created before it) counts from the period start. Infeasible plans
deploy nothing and are not in effect. Dollars = Σ $/h × hours in effect inside the period.

- Per day (UTC calendar day of the catalog's timestamps): dollars spent, mean $/h over the hours
  covered, hour-weighted SLO attainment of the plans that have a simulation, replans created.
- Savings to date vs each baseline kind: Σ hours × (baseline $/h − Coral $/h) over the segments
  whose plan has a feasible baseline of that kind; ratio = baseline $ / Coral $ over those segments.
- Churn of a replan: template instances added + removed against the previous plan, per
  (template, cloud, region, pricing): added = Σ max(new − old, 0), removed = Σ max(old − new, 0).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

AssignmentKey = tuple[str, str, str, str]  # template_id, cloud, region, pricing


@dataclass(frozen=True, slots=True)
class HistoryPlan:
    """One feasible Coral plan as the history needs it."""

    plan_id: str
    created_at: datetime
    usd_per_hr: float
    usd_per_hr_by_gpu: Mapping[str, float]
    baseline_usd_per_hr: Mapping[str, float]  # baseline kind -> $/h (feasible baselines only)
    slo_attainment: float | None
    goodput_req_per_s: float | None
    instances: Mapping[AssignmentKey, int]


@dataclass(frozen=True, slots=True)
class HistoryInputs:
    """Plans created in [since, until] plus the one in effect at `since` (if any)."""

    since: datetime
    until: datetime
    prior: HistoryPlan | None
    plans: tuple[HistoryPlan, ...]


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of time one plan was in effect, clipped to the period."""

    plan: HistoryPlan
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600.0


@dataclass(frozen=True, slots=True)
class ReplanRow:
    """One replan in the period."""

    plan_id: str
    created_at: datetime
    usd_per_hr: float
    usd_per_hr_by_gpu: Mapping[str, float]
    baseline_usd_per_hr: Mapping[str, float]
    slo_attainment: float | None
    goodput_req_per_s: float | None
    added: int | None  # None: no earlier plan to compare with
    removed: int | None


@dataclass(frozen=True, slots=True)
class DayRow:
    """One calendar day of the period."""

    day: date
    usd: float
    hours: float
    mean_usd_per_hr: float | None
    slo_attainment: float | None
    replans: int
    churn: int


@dataclass(frozen=True, slots=True)
class SavingsRow:
    """Savings to date against one baseline kind."""

    kind: str
    coral_usd: float
    baseline_usd: float
    saved_usd: float
    ratio: float | None
    hours: float


@dataclass(frozen=True, slots=True)
class CumulativePoint:
    """Savings against one baseline kind accumulated up to `at`."""

    kind: str
    at: datetime
    saved_usd: float


@dataclass(frozen=True, slots=True)
class HistoryReport:
    """The computed over-time report; `empty` when no plan was in effect in the period."""

    since: datetime
    until: datetime
    empty: bool
    replans: tuple[ReplanRow, ...]
    days: tuple[DayRow, ...]
    savings: tuple[SavingsRow, ...]
    cumulative: tuple[CumulativePoint, ...]
    segments: tuple[Segment, ...]
    total_usd: float
    mean_usd_per_hr: float | None
    slo_attainment: float | None


def churn(old: Mapping[AssignmentKey, int], new: Mapping[AssignmentKey, int]) -> tuple[int, int]:
    """(added, removed) template instances going from `old` to `new`."""
    added = removed = 0
    for key in set(old) | set(new):
        diff = new.get(key, 0) - old.get(key, 0)
        added += max(diff, 0)
        removed += max(-diff, 0)
    return added, removed


def segments(inputs: HistoryInputs) -> tuple[Segment, ...]:
    """When each plan was in effect inside [since, until]."""
    ordered = ([inputs.prior] if inputs.prior else []) + sorted(
        inputs.plans, key=lambda p: (p.created_at, p.plan_id)
    )
    result = []
    for i, plan in enumerate(ordered):
        start = max(plan.created_at, inputs.since)
        end = ordered[i + 1].created_at if i + 1 < len(ordered) else inputs.until
        end = min(end, inputs.until)
        if end > start:
            result.append(Segment(plan, start, end))
    return tuple(result)


def replan_rows(inputs: HistoryInputs) -> tuple[ReplanRow, ...]:
    """Each replan of the period with its churn against the plan before it."""
    rows = []
    previous = inputs.prior
    for plan in sorted(inputs.plans, key=lambda p: (p.created_at, p.plan_id)):
        added, removed = churn(previous.instances, plan.instances) if previous else (None, None)
        rows.append(
            ReplanRow(
                plan.plan_id,
                plan.created_at,
                plan.usd_per_hr,
                plan.usd_per_hr_by_gpu,
                plan.baseline_usd_per_hr,
                plan.slo_attainment,
                plan.goodput_req_per_s,
                added,
                removed,
            )
        )
        previous = plan
    return tuple(rows)


def _split_by_day(segment: Segment) -> list[tuple[date, float]]:
    """(day, hours) pieces of a segment cut at midnight."""
    pieces = []
    start = segment.start
    while start < segment.end:
        midnight = datetime.combine(start.date() + timedelta(days=1), datetime.min.time())
        end = min(midnight, segment.end)
        pieces.append((start.date(), (end - start).total_seconds() / 3600.0))
        start = end
    return pieces


def _weighted(pairs: list[tuple[float, float | None]]) -> float | None:
    """Hour-weighted mean of the values that are known."""
    known = [(h, v) for h, v in pairs if v is not None and h > 0]
    hours = sum(h for h, _ in known)
    return sum(h * v for h, v in known) / hours if hours else None


def day_rows(segs: tuple[Segment, ...], replans: tuple[ReplanRow, ...]) -> tuple[DayRow, ...]:
    """Dollars, mean $/h, attainment, replans and churn per calendar day."""
    pieces: dict[date, list[tuple[float, HistoryPlan]]] = defaultdict(list)
    for seg in segs:
        for day, hours in _split_by_day(seg):
            pieces[day].append((hours, seg.plan))
    counts: dict[date, list[ReplanRow]] = defaultdict(list)
    for row in replans:
        counts[row.created_at.date()].append(row)
    rows = []
    for day in sorted(set(pieces) | set(counts)):
        parts = pieces.get(day, [])
        usd = sum(h * p.usd_per_hr for h, p in parts)
        hours = sum(h for h, _ in parts)
        day_churn = sum((r.added or 0) + (r.removed or 0) for r in counts.get(day, []))
        attainment = _weighted([(h, p.slo_attainment) for h, p in parts])
        mean = usd / hours if hours else None
        rows.append(DayRow(day, usd, hours, mean, attainment, len(counts.get(day, [])), day_churn))
    return tuple(rows)


def savings(
    segs: tuple[Segment, ...],
) -> tuple[tuple[SavingsRow, ...], tuple[CumulativePoint, ...]]:
    """Savings to date per baseline kind, and their running totals at each segment end."""
    kinds = sorted({k for s in segs for k in s.plan.baseline_usd_per_hr})
    rows, points = [], []
    for kind in kinds:
        coral = base = hours = 0.0
        for seg in segs:
            if kind not in seg.plan.baseline_usd_per_hr:
                continue
            coral += seg.hours * seg.plan.usd_per_hr
            base += seg.hours * seg.plan.baseline_usd_per_hr[kind]
            hours += seg.hours
            points.append(CumulativePoint(kind, seg.end, base - coral))
        rows.append(
            SavingsRow(kind, coral, base, base - coral, base / coral if coral else None, hours)
        )
    return tuple(rows), tuple(points)


def history_report(inputs: HistoryInputs) -> HistoryReport:
    """Compute the over-time report for [since, until]."""
    segs = segments(inputs)
    replans = replan_rows(inputs)
    days = day_rows(segs, replans)
    saving_rows, cumulative = savings(segs)
    total = sum(s.hours * s.plan.usd_per_hr for s in segs)
    hours = sum(s.hours for s in segs)
    return HistoryReport(
        since=inputs.since,
        until=inputs.until,
        empty=not segs and not replans,
        replans=replans,
        days=days,
        savings=saving_rows,
        cumulative=cumulative,
        segments=segs,
        total_usd=total,
        mean_usd_per_hr=total / hours if hours else None,
        slo_attainment=_weighted([(s.hours, s.plan.slo_attainment) for s in segs]),
    )


_PERIOD = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNIT_S = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_since(since: datetime | timedelta | str, until: datetime) -> datetime:
    """The period start: a timestamp as is, a timedelta or '30m'/'12h'/'7d'/'2w' before `until`,
    or an ISO date/timestamp. ValueError on anything else."""
    if isinstance(since, datetime):
        return since
    if isinstance(since, timedelta):
        return until - since
    match = _PERIOD.match(since)
    if match:
        return until - timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])
    try:
        return datetime.fromisoformat(since.strip())
    except ValueError:
        raise ValueError(
            f"cannot read --since {since!r}: use e.g. 7d, 12h, 30m, 2w or an ISO date"
        ) from None
