"""Placement scenarios as data (`data/scenarios/*.yaml`): load, validate, turn into problems.

Validation is pydantic at this edge; any error names the file and the field. Demand per model is
the scenario's total rate times the model's share (Zipf by rank, or explicit), with mean input
and output tokens from the bundled Azure 2023 trace it names (see `data/scenarios/README.md`).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from catalog_db.traces import load_trace
from planning.domain import ModelDemand, Offer, Pricing, Template
from planning.placement.problem import Mode, PlacementProblem, SolverName
from planning.workload import summarise, zipf_shares

SCENARIO_DIR = Path(__file__).parent / "data" / "scenarios"
PRICES = SCENARIO_DIR / "gpu_prices.csv"
# SLOs of the workload classes (data/workload_classes.csv), the default when a model states none
_CLASS_SLOS = {"chat": (1.0, 0.05), "code": (1.0, 0.05), "long": (4.0, 0.08)}


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelEntry(_Strict):
    model: str
    variant_of: str | None = None
    trace: Literal["conv", "code"]
    workload_class: str = "chat"
    share: float | None = Field(None, gt=0)
    ttft_slo_s: float | None = Field(None, gt=0)
    tpot_slo_s: float | None = Field(None, gt=0)
    priority: float = Field(1.0, ge=0)


class DemandSpec(_Strict):
    total_req_per_s: float = Field(gt=0, allow_inf_nan=False)
    zipf_exponent: float = Field(1.0, ge=0)
    models: list[ModelEntry] = Field(min_length=1)


class Counts(_Strict):
    on_demand: int = Field(0, ge=0)
    spot: int = Field(0, ge=0)


class InventorySpec(_Strict):
    regions: list[str] = Field(min_length=1)
    gpu_types: list[str] = Field(min_length=1)
    default: Counts
    overrides: dict[str, Counts] = Field(default_factory=dict)
    spot_price_factor: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _regions_have_clouds(self) -> InventorySpec:
        for region in self.regions:
            if region.count("/") != 1:
                raise ValueError(f"region {region!r} must be written cloud/region")
        return self


class ScenarioFile(_Strict):
    name: str
    description: str
    mode: Mode = Mode.COST
    headroom: float = Field(0.1, ge=0)
    max_spot_share: float | None = Field(None, ge=0, le=1)
    budget_usd_per_hr: float | None = Field(None, gt=0)
    demand: DemandSpec
    inventory: InventorySpec


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario: demand per model, offers, knobs, and variant -> base model."""

    name: str
    description: str
    mode: Mode
    headroom: float
    max_spot_share: float | None
    budget_usd_per_hr: float | None
    demands: tuple[ModelDemand, ...]
    offers: tuple[Offer, ...]
    variants: tuple[tuple[str, str], ...]  # (variant model, base model)

    @property
    def base_models(self) -> tuple[str, ...]:
        """The catalog models whose templates the scenario needs."""
        bases = dict(self.variants)
        return tuple(sorted({bases.get(d.model, d.model) for d in self.demands}))


def scenario_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))


def scenario_path(name_or_path: str | Path) -> Path:
    """A bundled scenario by name (`d_zipf46`, or its letter prefix `d`) or a YAML path."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"}:
        return path
    matches = [
        n
        for n in scenario_names()
        if n == str(name_or_path) or n.split("_")[0] == str(name_or_path)
    ]
    if len(matches) != 1:
        raise ScenarioError(
            f"unknown scenario {name_or_path!r}; known: {', '.join(scenario_names())}"
        )
    return SCENARIO_DIR / f"{matches[0]}.yaml"


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Read and validate a scenario; raises ScenarioError naming the file and the field."""
    path = scenario_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = ScenarioFile.model_validate(raw)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{path}: field {field}: {first['msg']}") from None
    return Scenario(
        name=spec.name,
        description=spec.description,
        mode=spec.mode,
        headroom=spec.headroom,
        max_spot_share=spec.max_spot_share,
        budget_usd_per_hr=spec.budget_usd_per_hr,
        demands=_demands(path, spec.demand),
        offers=_offers(path, spec.inventory),
        variants=tuple((m.model, m.variant_of) for m in spec.demand.models if m.variant_of),
    )


@functools.lru_cache(maxsize=4)
def trace_token_means(trace: str) -> tuple[float, float]:
    """Mean input and output tokens of a bundled Azure 2023 trace, over the whole trace."""
    (row,) = summarise(load_trace(trace))
    return row.mean_input_tokens, row.mean_output_tokens


def _demands(path: Path, spec: DemandSpec) -> tuple[ModelDemand, ...]:
    explicit = [m.share for m in spec.models]
    if any(s is not None for s in explicit):
        if any(s is None for s in explicit):
            raise ScenarioError(f"{path}: field demand.models.share: give all shares or none")
        total = sum(s for s in explicit if s is not None)
        shares = tuple((s or 0.0) / total for s in explicit)
    else:
        shares = zipf_shares(len(spec.models), spec.zipf_exponent)
    out = []
    for entry, share in zip(spec.models, shares, strict=True):
        if entry.workload_class not in _CLASS_SLOS:
            raise ScenarioError(
                f"{path}: field demand.models.workload_class: unknown "
                f"{entry.workload_class!r} for {entry.model}"
            )
        mean_in, mean_out = trace_token_means(entry.trace)
        ttft, tpot = _CLASS_SLOS[entry.workload_class]
        out.append(
            ModelDemand(
                model=entry.model,
                rate_req_per_s=spec.total_req_per_s * share,
                mean_input_tokens=mean_in,
                mean_output_tokens=mean_out,
                ttft_slo_s=entry.ttft_slo_s or ttft,
                tpot_slo_s=entry.tpot_slo_s or tpot,
                workload_class=entry.workload_class,
                priority=entry.priority,
            )
        )
    if len({d.model for d in out}) != len(out):
        raise ScenarioError(f"{path}: field demand.models: a model is listed twice")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Price:
    gpu_type: str
    machine_gpus: int
    ondemand_usd_per_hr: float
    spot_usd_per_hr: float | None


def _prices() -> tuple[_Price, ...]:
    with PRICES.open(newline="", encoding="utf-8") as handle:
        return tuple(
            _Price(
                r["gpu_type"],
                int(r["machine_gpus"]),
                float(r["ondemand_usd_per_hr"]),
                float(r["spot_usd_per_hr"]) if r["spot_usd_per_hr"] else None,
            )
            for r in csv.DictReader(handle)
        )


def _offers(path: Path, spec: InventorySpec) -> tuple[Offer, ...]:
    prices = _prices()
    known = {p.gpu_type for p in prices}
    for g in [*spec.gpu_types, *spec.overrides]:
        if g not in known:
            raise ScenarioError(
                f"{path}: field inventory.gpu_types: no price for {g!r} in {PRICES.name}"
            )
    out = []
    for region in spec.regions:
        cloud, name = region.split("/")
        for p in (p for p in prices if p.gpu_type in spec.gpu_types):
            counts = spec.overrides.get(p.gpu_type, spec.default)
            spot = p.spot_usd_per_hr
            if spec.spot_price_factor is not None:
                spot = p.ondemand_usd_per_hr * spec.spot_price_factor
            itype = f"{p.gpu_type.lower()}-x{p.machine_gpus}"
            out.append(
                Offer(
                    cloud,
                    name,
                    itype,
                    Pricing.ON_DEMAND,
                    p.gpu_type,
                    p.machine_gpus,
                    p.ondemand_usd_per_hr,
                    counts.on_demand,
                )
            )
            if spot is not None and counts.spot:
                out.append(
                    Offer(
                        cloud,
                        name,
                        itype,
                        Pricing.SPOT,
                        p.gpu_type,
                        p.machine_gpus,
                        spot,
                        counts.spot,
                    )
                )
    return tuple(out)


def variant_templates(scenario: Scenario, templates: tuple[Template, ...]) -> tuple[Template, ...]:
    """The given templates plus, for each variant model, copies of its base model's templates
    under the variant's name (template id suffixed `@variant`)."""
    out = list(templates)
    for variant, base in scenario.variants:
        out.extend(
            replace(t, model=variant, template_id=f"{t.template_id}@{variant}")
            for t in templates
            if t.model == base
        )
    return tuple(out)


def to_problem(
    scenario: Scenario,
    templates: tuple[Template, ...],
    *,
    solver: SolverName = SolverName.CBC,
    time_limit_s: float = 30.0,
    mode: Mode | None = None,
) -> PlacementProblem:
    """The placement problem of a scenario over the given (base-model) templates."""
    return PlacementProblem(
        templates=variant_templates(scenario, templates),
        offers=scenario.offers,
        demands=scenario.demands,
        headroom=scenario.headroom,
        mode=mode or scenario.mode,
        max_spot_share=scenario.max_spot_share,
        budget_usd_per_hr=scenario.budget_usd_per_hr,
        solver=solver,
        time_limit_s=time_limit_s,
        name=scenario.name,
    )


class WorkloadRow(_Strict):
    model: str
    rate_req_per_s: float = Field(ge=0, allow_inf_nan=False)
    mean_input_tokens: float = Field(gt=0, allow_inf_nan=False)
    mean_output_tokens: float = Field(gt=0, allow_inf_nan=False)
    ttft_slo_s: float = Field(gt=0, allow_inf_nan=False)
    tpot_slo_s: float = Field(gt=0, allow_inf_nan=False)
    workload_class: str = "chat"
    priority: float = Field(1.0, ge=0, allow_inf_nan=False)


def load_workload_csv(path: str | Path) -> tuple[ModelDemand, ...]:
    """Demand per model from a CSV with the columns of `WorkloadRow` (header row first).
    Raises ScenarioError naming file, line and field on the first bad row."""
    file = Path(path)
    out = []
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            for line, raw in enumerate(csv.DictReader(handle), start=2):
                values = {k: v for k, v in raw.items() if k and v not in (None, "")}
                try:
                    row = WorkloadRow.model_validate(values)
                except ValidationError as error:
                    first = error.errors()[0]
                    field = ".".join(str(p) for p in first["loc"])
                    raise ScenarioError(f"{file}:{line}: field {field}: {first['msg']}") from None
                out.append(ModelDemand(**row.model_dump()))
    except FileNotFoundError:
        raise ScenarioError(f"{file}: no such workload file") from None
    if not out:
        raise ScenarioError(f"{file}: no demand rows")
    return tuple(out)
