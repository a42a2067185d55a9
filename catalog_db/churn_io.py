"""The deployment a replan starts from, as the churn term of the placement problem."""

from __future__ import annotations

from pathlib import Path

from catalog_db.connection import read_connection
from planning.domain import Pricing
from planning.placement.problem import Churn, Slot


def current_churn(
    db_path: Path | str,
    target: str,
    penalty_usd_per_hr_per_change: float,
    max_changes: int | None = None,
) -> Churn | None:
    """Template instances of the plan now active on `target`, or None when nothing is deployed
    (then every instance is new and churn has nothing to compare with)."""
    with read_connection(db_path) as con:
        rows = con.execute(
            "SELECT a.template_id, a.cloud, a.region, a.pricing, a.count FROM plan_assignments a "
            "JOIN (SELECT plan_id FROM deployments WHERE target = ? AND status = 'active' "
            "      ORDER BY created_at DESC, deployment_id DESC LIMIT 1) d USING (plan_id) "
            "ORDER BY ALL",
            [target],
        ).fetchall()
    if not rows:
        return None
    previous = tuple(
        (Slot(template_id, cloud, region, Pricing(pricing)), count)
        for template_id, cloud, region, pricing, count in rows
    )
    return Churn(previous, penalty_usd_per_hr_per_change, max_changes)
