"""Render a plan into deployment units: one vLLM engine per template instance, one router per
model and region — FluidPD over the group's P/D engines, or least-loaded over a colocated-only
group's replicas (pure: `RenderInput` in, `DeploymentSpec` out, errors as
`RenderError` before anything is applied)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from deploy.render.engine_args import (
    PULL_CONNECTOR,
    PUSH_CONNECTOR,
    EngineShape,
    RenderOptions,
    engine_args,
    engine_env,
    kv_role,
)
from deploy.render.inputs import AssignmentInput, RenderInput, RentalInput, TemplateSpec
from deploy.render.units import (
    HOST_IP_PLACEHOLDER,
    DeploymentSpec,
    EngineUnit,
    RouterInstance,
    RouterUnit,
    StageMachine,
    unit_name,
)
from planning.domain import Phase, Stage
from planning.routing.fluidpd_params import FluidPDParams


class RenderError(ValueError):
    """The plan cannot be rendered into a vLLM deployment; the message says which part."""


@dataclass(frozen=True, slots=True)
class _Group:
    """Connector choice of one (cloud, region, model) group."""

    connector: str | None


def check_template(spec: TemplateSpec) -> None:
    """Refuse templates vLLM cannot run: PP decode, uneven TP, a missing or wrong layer split."""
    t = spec.template
    pp = len(t.stages)
    if not t.stages:
        raise RenderError(f"template {t.template_id} has no stages")
    if t.phase is Phase.DECODE and pp > 1:
        raise RenderError(
            f"template {t.template_id}: decode with pipeline parallelism ({pp} stages) is not "
            "supported by vLLM; decode templates must be single-stage"
        )
    if len({s.tp for s in t.stages}) > 1:
        raise RenderError(
            f"template {t.template_id}: stages use different TP sizes "
            f"{[s.tp for s in t.stages]}; vLLM runs one --tensor-parallel-size for all stages"
        )
    if pp > 1:
        _check_partition(spec, pp)


def _check_partition(spec: TemplateSpec, pp: int) -> None:
    t = spec.template
    if not spec.pp_layer_partition:
        raise RenderError(
            f"template {t.template_id}: {pp} pipeline stages but no pp_layer_partition "
            "(VLLM_PP_LAYER_PARTITION) stored"
        )
    parts = spec.pp_layer_partition.split(",")
    if len(parts) != pp or not all(p.strip().isdigit() for p in parts):
        raise RenderError(
            f"template {t.template_id}: pp_layer_partition {spec.pp_layer_partition!r} does not "
            f"give one layer count per stage for PP={pp}"
        )
    if [int(p) for p in parts] != [s.num_layers for s in t.stages]:
        raise RenderError(
            f"template {t.template_id}: pp_layer_partition {spec.pp_layer_partition!r} disagrees "
            f"with the stages' layer counts {t.pp_layer_partition!r}"
        )


def _machine_for(
    rentals: Iterable[RentalInput], a: AssignmentInput, gpu_type: str, gpus: int
) -> RentalInput | None:
    """The plan's rented machine of `gpu_type` here with the fewest GPUs that still hold `gpus`
    (ties: cheaper, then by name) — the tightest fit of buddy allocation."""
    fits = [
        r
        for r in rentals
        if (r.cloud, r.region, r.pricing, r.gpu_type) == (a.cloud, a.region, a.pricing, gpu_type)
        and r.gpu_count >= gpus
    ]
    if not fits:
        return None
    return min(fits, key=lambda r: (r.gpu_count, r.price_usd_per_hr, r.instance_type))


def place_stages(
    spec: TemplateSpec, a: AssignmentInput, rentals: tuple[RentalInput, ...]
) -> tuple[tuple[StageMachine, ...], bool]:
    """Machine of each stage and whether the pipeline spans machines. One machine when all
    stages share a GPU type and a rented machine holds all their GPUs."""
    stages = spec.template.stages
    total = sum(s.tp for s in stages)
    one = _machine_for(rentals, a, stages[0].gpu_type, total)
    if len({s.gpu_type for s in stages}) == 1 and one is not None:
        return tuple(_stage(i, s, one) for i, s in enumerate(stages)), False
    placed = []
    for i, stage in enumerate(stages):
        machine = _machine_for(rentals, a, stage.gpu_type, stage.tp)
        if machine is None:
            raise RenderError(
                f"plan rents no {a.pricing} machine with >= {stage.tp} {stage.gpu_type} GPUs in "
                f"{a.cloud}/{a.region} for stage {i} of template {spec.template.template_id}"
            )
        placed.append(_stage(i, stage, machine))
    return tuple(placed), len(stages) > 1


def _stage(index: int, stage: Stage, machine: RentalInput) -> StageMachine:
    return StageMachine(
        stage_index=index,
        gpu_type=machine.gpu_type,
        tp=stage.tp,
        num_layers=stage.num_layers,
        instance_type=machine.instance_type,
        machine_gpu_count=machine.gpu_count,
    )


def _group_connector(data: RenderInput, cloud: str, region: str, model: str) -> _Group:
    phases = {
        data.template(a.template_id).template
        for a in data.assignments
        if (a.cloud, a.region, a.model) == (cloud, region, model)
    }
    has_p = any(t.phase is Phase.PREFILL for t in phases)
    has_d = any(t.phase is Phase.DECODE for t in phases)
    if not (has_p and has_d):
        return _Group(None)
    push = any(t.phase is Phase.PREFILL and len(t.stages) > 1 for t in phases)
    return _Group(PUSH_CONNECTOR if push else PULL_CONNECTOR)


def render_engines(
    data: RenderInput, a: AssignmentInput, fluidpd: FluidPDParams, options: RenderOptions
) -> tuple[EngineUnit, ...]:
    """The `a.count` engines of one assignment, ordinals 0..count-1."""
    spec = data.template(a.template_id)
    check_template(spec)
    stages, multi = place_stages(spec, a, data.rentals)
    t = spec.template
    shape = EngineShape(
        role=t.phase,
        tp=t.stages[0].tp,
        pp=len(t.stages),
        multi_machine=multi,
        max_batch=t.max_batch,
        input_tokens=spec.input_tokens,
        connector=_group_connector(data, a.cloud, a.region, a.model).connector,
        flip_enabled=fluidpd.fluid_role_enabled,
        fluid_token=fluidpd.fluid_token_enabled,
        fluid_token_max_step_share=fluidpd.fluid_token_max_step_share,
    )
    args = engine_args(shape, options)
    env = engine_env(shape, spec.pp_layer_partition, options, HOST_IP_PLACEHOLDER)
    return tuple(
        EngineUnit(
            unit_id=f"{a.cloud}/{a.region}/{a.model}/{t.template_id}/{a.pricing}-{i}",
            model=a.model,
            cloud=a.cloud,
            region=a.region,
            pricing=str(a.pricing),
            role=t.phase,
            template_id=t.template_id,
            kv_role=kv_role(shape),
            args=args,
            env=env,
            stages=stages,
            multi_machine=multi,
            http_port=options.engine_port,
        )
        for i in range(a.count)
    )


def _instance_perf(spec: TemplateSpec) -> tuple[tuple[str, float], ...]:
    """The router's perf model of one instance from its template's evaluated rating
    (a linear model through the rated point: no fixed cost, no KV-transfer term)."""
    t = spec.template
    if t.phase is Phase.COLOCATED and not (t.latency_s and t.max_batch):
        return ()  # rated in requests/s; the colocated router balances by in-flight count only
    if t.phase is Phase.PREFILL:
        if not t.throughput_tokens_per_s:
            raise RenderError(f"template {t.template_id} has no prefill tokens/s rating")
        return (("prefill_s_per_token", 1.0 / t.throughput_tokens_per_s),)
    if not (t.latency_s and t.max_batch):
        raise RenderError(f"template {t.template_id} has no TPOT and max batch rating")
    kv_tokens = t.max_batch * (spec.input_tokens + spec.output_tokens)
    return (
        ("decode_s_per_seq", t.latency_s / t.max_batch),
        ("kv_capacity_tokens", float(kv_tokens)),
    )


def _group_perf(instances: tuple[RouterInstance, ...]) -> tuple[tuple[str, float], ...]:
    """Shared LinearStepModel: the first prefill's and first decode's terms (colocated group:
    the first instance's); zeros elsewhere."""
    base = dict.fromkeys(_PERF_FIELDS, 0.0)
    for role in (Phase.PREFILL, Phase.DECODE, Phase.COLOCATED):
        first = next((i for i in instances if i.role is role), None)
        base.update(dict(first.perf) if first else {})
    return tuple(sorted(base.items()))


_PERF_FIELDS = (
    "prefill_fixed_s", "prefill_s_per_token", "decode_fixed_s", "decode_s_per_seq",
    "decode_s_per_context_token", "kv_transfer_s_per_token", "kv_capacity_tokens",
)  # fmt: skip


def render_router(
    data: RenderInput,
    engines: tuple[EngineUnit, ...],
    fluidpd: FluidPDParams,
    options: RenderOptions,
) -> RouterUnit:
    """The router of one (cloud, region, model) group: `engines` are its P/D engines, or all
    of its engines when they are all colocated."""
    first = engines[0]
    try:
        slo = data.slo(first.model)
    except KeyError:
        raise RenderError(f"plan {data.plan_id} has no SLOs for model {first.model}") from None
    instances = tuple(
        RouterInstance(
            e.unit_id,
            unit_name(e.unit_id),
            e.role,
            e.kv_role,
            e.http_port,
            _instance_perf(data.template(e.template_id)),
        )
        for e in engines
    )
    return RouterUnit(
        unit_id=f"router/{first.cloud}/{first.region}/{first.model}",
        model=first.model,
        cloud=first.cloud,
        region=first.region,
        http_port=options.router_port,
        ttft_slo_s=slo.ttft_slo_s,
        tpot_slo_s=slo.tpot_slo_s,
        instances=instances,
        perf=_group_perf(instances),
        fluidpd=tuple(sorted(fluidpd.to_dict().items())),
    )


def render_deployment(
    data: RenderInput,
    fluidpd: FluidPDParams | None = None,
    options: RenderOptions | None = None,
) -> DeploymentSpec:
    """All engines and routers of a plan, sorted by unit id (stable across renders)."""
    params = fluidpd or FluidPDParams()
    opts = options or RenderOptions()
    if not data.assignments:
        raise RenderError(f"plan {data.plan_id} assigns no templates; nothing to deploy")
    for a in data.assignments:
        try:
            data.template(a.template_id)
        except KeyError:
            raise RenderError(
                f"plan {data.plan_id} uses unknown template {a.template_id}"
            ) from None
    engines = sorted(
        (e for a in data.assignments for e in render_engines(data, a, params, opts)),
        key=lambda e: e.unit_id,
    )
    groups: dict[tuple[str, str, str], list[EngineUnit]] = {}
    for engine in engines:
        groups.setdefault((engine.cloud, engine.region, engine.model), []).append(engine)
    routers = tuple(
        render_router(data, pool, params, opts)
        for _, group in sorted(groups.items())
        if (pool := _router_pool(group))
    )
    return DeploymentSpec(plan_id=data.plan_id, engines=tuple(engines), routers=routers)


def _router_pool(group: list[EngineUnit]) -> tuple[EngineUnit, ...]:
    """The engines a group's router fronts (the router takes a P/D or a colocated-only pool):
    its prefill and decode engines when it has both, else all of them when all are colocated,
    else none (a group with P but no D, or D but no P, cannot serve a request). The colocated
    replicas of a group that also has P/D pairs get no router (not supported yet)."""
    roles = {e.role for e in group}
    if {Phase.PREFILL, Phase.DECODE} <= roles:
        return tuple(e for e in group if e.role is not Phase.COLOCATED)
    if roles == {Phase.COLOCATED}:
        return tuple(group)
    return ()
