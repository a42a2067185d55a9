"""Build the template set: every model x phase x workload class, enumerated, rated, pruned.

`build_templates` is the pure entry point the catalog (`catalog_db.templates_io`) and the
nightly flow wrap. It returns the kept templates, every rated template (for tests and
reports) and per-group counts:

- `unrestricted`: all multisets of 1..S usable stage shapes (mixed TP, any GPU types), counted;
- `enumerated`: the same inside the space `TemplateParams` allows (one TP degree per pipeline,
  at most `max_gpu_types_per_pipeline` GPU types), counted, not materialised;
- `evaluated`: memory-feasible multisets rated (minimal ones by default, see `enumerate`);
- `feasible`: rated multisets with some batch meeting the SLOs and memory;
- `kept`: non-dominated feasible ones (see `dominance`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from planning.domain import GpuType, ModelArch, Phase, Stage, Template, WorkloadClass
from planning.perf_table import PerfTable, StageKey
from planning.templates.dominance import prune_group
from planning.templates.enumerate import (
    class_capacity,
    count_multisets,
    minimal_multisets,
    stage_models,
    stage_specs,
)
from planning.templates.evaluate import Evaluation, PipelineEvaluator, StageSpec
from planning.templates.params import PipelineSpace, TemplateParams


@dataclass(frozen=True, slots=True)
class GroupCounts:
    """Search counts of one (model, phase, workload class)."""

    model: str
    phase: Phase
    workload_class: str
    stage_shapes: int
    unrestricted: int  # multisets of 1..S shapes with mixed TP and any number of GPU types
    enumerated: int  # the same within the space params allow (uniform TP, GPU types)
    evaluated: int
    feasible: int
    kept: int


@dataclass(frozen=True, slots=True)
class TemplateBuild:
    """Result of one build: kept templates, all feasible rated ones, counts per group."""

    templates: tuple[Template, ...]
    rated: tuple[Template, ...]
    counts: tuple[GroupCounts, ...]

    @property
    def enumerated(self) -> int:
        return sum(c.enumerated for c in self.counts)

    @property
    def evaluated(self) -> int:
        return sum(c.evaluated for c in self.counts)

    @property
    def kept(self) -> int:
        return len(self.templates)


def template_id(model: str, phase: Phase, workload_class: str, stages: Sequence[Stage]) -> str:
    """Stable id: the first 16 hex digits of SHA-256 over model, phase, class and stages."""
    payload = json.dumps(
        [model, str(phase), workload_class, [[s.gpu_type, s.tp, s.num_layers] for s in stages]]
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def build_templates(
    models: Iterable[ModelArch],
    gpus: Iterable[GpuType],
    classes: Iterable[WorkloadClass],
    tables: Mapping[StageKey, PerfTable],
    params: TemplateParams | None = None,
) -> TemplateBuild:
    """Enumerate, rate and prune templates for every model, phase and class.

    `tables`: profile grids (`planning.perf_table.build_tables`) of any models; a model without
    tables for a phase simply gets no templates for it (callers check coverage first).
    """
    params = params or TemplateParams()
    gpu_list, class_list = tuple(gpus), tuple(classes)
    items = tuple(tables.items())
    kept: list[Template] = []
    rated: list[Template] = []
    counts: list[GroupCounts] = []
    for arch in models:
        prefill = stage_models(arch, Phase.PREFILL, gpu_list, items, params)
        decode = stage_models(arch, Phase.DECODE, gpu_list, items, params)
        for phase in params.phases:
            specs = stage_specs(phase, prefill, decode)
            for wclass in class_list:
                group, count = _build_group(arch, phase, wclass, specs, params)
                rated.extend(group)
                group_kept = prune_group(group)
                kept.extend(group_kept)
                counts.append(_with_kept(count, len(group_kept)))
    return TemplateBuild(tuple(kept), tuple(rated), tuple(counts))


def _build_group(
    arch: ModelArch,
    phase: Phase,
    wclass: WorkloadClass,
    specs: Sequence[StageSpec],
    params: TemplateParams,
) -> tuple[list[Template], GroupCounts]:
    """Rated feasible templates of one (model, phase, class) and its counts (kept = 0)."""
    caps = [class_capacity(s, phase, wclass) for s in specs]
    usable = [s for s, c in zip(specs, caps, strict=True) if c > 0]
    usable_caps = [c for c in caps if c > 0]
    max_stages = params.max_stages(phase)
    candidates: list[tuple[int, ...]] = []
    enumerated = 0
    for group in _tp_groups(usable, params.uniform_tp):
        kinds = [usable[i].primary.shape.gpu_type for i in group]
        found = minimal_multisets(
            [usable_caps[i] for i in group],
            arch.num_layers,
            max_stages,
            kinds,
            params.max_gpu_types_per_pipeline,
            minimal=params.pipelines is PipelineSpace.MINIMAL,
        )
        candidates.extend(tuple(group[j] for j in combo) for combo in found)
        sizes = Counter(kinds).values()
        enumerated += count_multisets(list(sizes), max_stages, params.max_gpu_types_per_pipeline)
    evaluator = PipelineEvaluator(arch, wclass, phase, params)
    templates = []
    for combo in candidates:
        stages = [usable[i] for i in combo]
        rating = evaluator.evaluate(stages)
        if rating is not None:
            templates.append(_template(arch, phase, wclass, stages, rating))
    count = GroupCounts(
        arch.model,
        phase,
        wclass.workload_class,
        stage_shapes=len(usable),
        unrestricted=count_multisets([1] * len(usable), max_stages),
        enumerated=enumerated,
        evaluated=len(candidates),
        feasible=len(templates),
        kept=0,
    )
    return templates, count


def _tp_groups(specs: Sequence[StageSpec], uniform_tp: bool) -> list[list[int]]:
    """Indices of the stage shapes a pipeline may combine: one group per TP degree when every
    stage must share it (vLLM's TP x PP grid), else one group of all."""
    if not uniform_tp:
        return [list(range(len(specs)))]
    groups: dict[int, list[int]] = {}
    for i, spec in enumerate(specs):
        groups.setdefault(spec.primary.shape.tp, []).append(i)
    return [groups[tp] for tp in sorted(groups)]


def _with_kept(count: GroupCounts, kept: int) -> GroupCounts:
    return GroupCounts(
        count.model,
        count.phase,
        count.workload_class,
        count.stage_shapes,
        count.unrestricted,
        count.enumerated,
        count.evaluated,
        count.feasible,
        kept,
    )


def _template(
    arch: ModelArch,
    phase: Phase,
    wclass: WorkloadClass,
    specs: Sequence[StageSpec],
    rating: Evaluation,
) -> Template:
    """A Template in canonical stage order (GPU type, TP, layers), with its provenance."""
    stages = tuple(
        sorted(
            (
                Stage(s.primary.shape.gpu_type, s.primary.shape.tp, n)
                for s, n in zip(specs, rating.split.layers, strict=True)
            ),
            key=lambda st: (st.gpu_type, st.tp, st.num_layers),
        )
    )
    sources = {b for s in specs for b in s.primary.backends}
    sources |= {b for s in specs if s.prefill is not None for b in s.prefill.backends}
    return Template(
        template_id=template_id(arch.model, phase, wclass.workload_class, stages),
        model=arch.model,
        phase=phase,
        workload_class=wclass.workload_class,
        stages=stages,
        throughput_tokens_per_s=rating.throughput_tokens_per_s,
        throughput_req_per_s=rating.throughput_req_per_s,
        latency_s=rating.latency_s,
        max_batch=rating.batch,
        profile_backend="+".join(sorted({b for b, _ in sources})),
        profile_backend_version="+".join(sorted({v for _, v in sources})),
    )
