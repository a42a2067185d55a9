"""Hand-built templates, offers and demands for placement tests, and a hypothesis strategy."""

from __future__ import annotations

from hypothesis import strategies as st

from planning.domain import ModelDemand, Offer, Phase, Pricing, Stage, Template
from planning.placement.problem import PlacementProblem


def template(
    tid: str,
    model: str,
    phase: Phase,
    stages: tuple[tuple[str, int], ...],
    capacity: float,
    latency_s: float | None = None,
    workload_class: str = "chat",
) -> Template:
    """A template rated `capacity` tokens/s (P/D) or req/s (colocated)."""
    coloc = phase == Phase.COLOCATED
    return Template(
        template_id=tid,
        model=model,
        phase=phase,
        workload_class=workload_class,
        stages=tuple(Stage(g, tp, 16) for g, tp in stages),
        throughput_tokens_per_s=None if coloc else capacity,
        throughput_req_per_s=capacity if coloc else None,
        latency_s=latency_s,
        max_batch=None,
        profile_backend="hand",
        profile_backend_version="0",
    )


def offer(
    gpu_type: str,
    gpus: int,
    price: float,
    available: int,
    region: str = "r1",
    pricing: Pricing = Pricing.ON_DEMAND,
    cloud: str = "aws",
) -> Offer:
    return Offer(
        cloud, region, f"{gpu_type.lower()}x{gpus}", pricing, gpu_type, gpus, price, available
    )


def demand(
    model: str, rate: float, inp: float = 1000, out: float = 200, priority: float = 1.0
) -> ModelDemand:
    return ModelDemand(model, rate, inp, out, 1.0, 0.05, "chat", priority)


GPU_TYPES = ("G1", "G2", "G3")


@st.composite
def small_problems(draw: st.DrawFn) -> PlacementProblem:
    """1-2 models, 1-2 regions, 2-3 GPU types; P, D and colocated templates; modest demand."""
    models = [f"m{i}" for i in range(draw(st.integers(1, 2)))]
    regions = [f"r{i}" for i in range(draw(st.integers(1, 2)))]
    templates = []
    for m in models:
        for j, g in enumerate(GPU_TYPES):
            tp = draw(st.sampled_from([1, 2]))
            templates.append(
                template(f"{m}-p-{g}", m, Phase.PREFILL, ((g, tp),), draw(st.floats(2000, 20000)))
            )
            templates.append(
                template(f"{m}-d-{g}", m, Phase.DECODE, ((g, tp),), draw(st.floats(300, 3000)))
            )
            if j != 1:
                templates.append(
                    template(
                        f"{m}-c-{g}", m, Phase.COLOCATED, ((g, tp),), draw(st.floats(0.5, 5.0))
                    )
                )
    offers = []
    for r in regions:
        for g in GPU_TYPES:
            for c in Pricing:
                size = draw(st.sampled_from([2, 4, 8]))
                price = draw(st.floats(0.5, 4.0)) * size * (0.4 if c == Pricing.SPOT else 1)
                offers.append(offer(g, size, round(price, 3), draw(st.integers(0, 6)), r, c))
    demands = [demand(m, draw(st.floats(0.5, 8.0))) for m in models]
    return PlacementProblem(
        tuple(templates), tuple(offers), tuple(demands), headroom=0.1, time_limit_s=20, mip_gap=0.0
    )
