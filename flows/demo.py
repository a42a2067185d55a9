"""`coral-demo` flow: the whole pipeline on embedded defaults, in one run (what `make demo` does).

profile (auto backend: AIConfigurator where it covers the GPU, analytic elsewhere) → templates
→ inventory snapshot (bundled catalog prices) → replan (Azure conv trace demand, MILP) →
simulate → report → dry-run rollout → daily cost report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefect import flow

from flows.cost_report import cost_report
from flows.nightly_profiling import nightly_profiling
from flows.replan import ReplanParams, replan

DEMO_MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B-Instruct",
]
DEMO_GPUS = ["H100-SXM", "H200-SXM", "A100-SXM-80GB", "L40S", "L4", "A10G"]


@dataclass(frozen=True, slots=True)
class DemoResult:
    plan_id: str
    report_html: str


@flow(name="coral-demo", log_prints=True)
def demo_pipeline(
    db: Path = Path("coral.duckdb"),
    out_dir: Path = Path("out"),
    models: list[str] = DEMO_MODELS,
    gpus: list[str] = DEMO_GPUS,
    total_rate_req_per_s: float = 20.0,
) -> DemoResult:
    """Run every stage once; returns the plan id and the HTML report path."""
    nightly_profiling(db=db, models=models, gpus=gpus, backend="auto")
    params = ReplanParams(
        db=db,
        models=models,
        total_rate_req_per_s=total_rate_req_per_s,
        auto_rollout=True,
        target="dry-run",
        out_dir=out_dir,
    )
    plan_id = replan(params)
    html = cost_report(since="1d", db=db, out_dir=out_dir)
    return DemoResult(plan_id, html)
