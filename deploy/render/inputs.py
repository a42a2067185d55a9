"""What rendering reads: a plan's assignments, rentals, templates and SLOs, as frozen values.

`catalog_db.deploy_io.load_render_input` builds one from the catalog; tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.domain import Phase, Pricing, Template


@dataclass(frozen=True, slots=True)
class AssignmentInput:
    """`count` instances of one template in one cloud region at one pricing class."""

    template_id: str
    model: str
    phase: Phase
    cloud: str
    region: str
    pricing: Pricing
    count: int


@dataclass(frozen=True, slots=True)
class RentalInput:
    """Machines the plan rents: `count` × `instance_type` with `gpu_count` GPUs of `gpu_type`."""

    cloud: str
    region: str
    instance_type: str
    pricing: Pricing
    gpu_type: str
    gpu_count: int
    count: int
    price_usd_per_hr: float


@dataclass(frozen=True, slots=True)
class TemplateSpec:
    """A template plus its stored `VLLM_PP_LAYER_PARTITION` (None when the catalog has none)."""

    template: Template
    pp_layer_partition: str | None
    input_tokens: int  # of the template's workload class: sizes the token budgets
    output_tokens: int  # of the workload class: sizes the router's KV capacity estimate


@dataclass(frozen=True, slots=True)
class ModelSlo:
    model: str
    ttft_slo_s: float
    tpot_slo_s: float


@dataclass(frozen=True, slots=True)
class RenderInput:
    """Everything one plan's rendering needs; no catalog handle, no clock."""

    plan_id: str
    assignments: tuple[AssignmentInput, ...]
    rentals: tuple[RentalInput, ...]
    templates: tuple[TemplateSpec, ...]
    slos: tuple[ModelSlo, ...]

    def template(self, template_id: str) -> TemplateSpec:
        for spec in self.templates:
            if spec.template.template_id == template_id:
                return spec
        raise KeyError(template_id)

    def slo(self, model: str) -> ModelSlo:
        for slo in self.slos:
            if slo.model == model:
                return slo
        raise KeyError(model)
