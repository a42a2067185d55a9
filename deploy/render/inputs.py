"""What rendering reads: a plan's assignments, rentals, templates and SLOs, as frozen values.

`catalog_db.deploy_io.load_render_input` builds one from the catalog; tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.domain import Phase, Pricing, Template
from planning.placement.plan import Rental


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


# The placement plan's own rental value: same fields, one definition.
RentalInput = Rental


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
