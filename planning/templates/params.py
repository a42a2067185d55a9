"""Parameters of a template build: search space and the hand-off model between stages."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from planning.domain import Phase


class PipelineSpace(StrEnum):
    """Which memory-feasible stage multisets are rated (see `planning.templates.enumerate`)."""

    MINIMAL = "minimal"  # every stage needed to hold the model: fast, may miss some optima
    ALL = "all"  # every memory-feasible multiset within the depth and GPU-type limits


@dataclass(frozen=True, slots=True)
class TemplateParams:
    """What to enumerate and how to cost a pipeline hand-off.

    `max_stages_*`: pipeline depth per phase. Decode and colocated default to one stage:
    vLLM does not run a PP>1 decode instance under P/D today (DESIGN.md, engine facts), and a
    colocated instance decodes too. Prefill defaults to up to 4 stages.

    `uniform_tp`: every stage of a pipeline has the same TP degree. vLLM builds one instance
    as a TP x PP grid (`--tensor-parallel-size` x `--pipeline-parallel-size`), so it cannot run
    stages of different TP; set False to explore what a more flexible engine could do.
    `pipelines`: MINIMAL rates only pipelines whose every stage is needed for memory; ALL
    also rates pipelines that add stages for speed (exhaustive, much slower on a full catalog).
    `max_gpu_types_per_pipeline`: an operational choice (one pipeline across three or four
    machine types is hard to schedule and to replace), and it bounds the search.

    Hand-off: a stage sends its output activations (tokens x hidden x `activation_bytes`) to
    the next stage on another machine. The defaults are the profiler's assumptions
    (catalog_db/data/calibration/model_constants.csv: `inter_node_gbps` 12.5 GB/s = 100 Gb/s
    Ethernet, `pp_handoff_latency_us` 50), so templates and the analytic profiles agree.
    """

    phases: tuple[Phase, ...] = (Phase.PREFILL, Phase.DECODE, Phase.COLOCATED)
    max_stages_prefill: int = 4
    max_stages_decode: int = 1
    max_stages_colocated: int = 1
    tp_degrees: tuple[int, ...] = (1, 2, 4, 8)
    uniform_tp: bool = True
    max_gpu_types_per_pipeline: int = 2
    pipelines: PipelineSpace = PipelineSpace.MINIMAL
    handoff_gbytes_per_s: float = 12.5
    handoff_latency_s: float = 50e-6
    activation_bytes: float = 2.0
    gpu_types: tuple[str, ...] | None = field(default=None)  # None: every GPU with profiles

    def max_stages(self, phase: Phase) -> int:
        return {
            Phase.PREFILL: self.max_stages_prefill,
            Phase.DECODE: self.max_stages_decode,
            Phase.COLOCATED: self.max_stages_colocated,
        }[phase]

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (stored in `template_sets.params`)."""
        values = asdict(self)
        values["phases"] = [str(p) for p in self.phases]
        values["pipelines"] = str(self.pipelines)
        values["tp_degrees"] = list(self.tp_degrees)
        values["gpu_types"] = None if self.gpu_types is None else list(self.gpu_types)
        return values

    @classmethod
    def from_json_dict(cls, values: dict[str, Any]) -> TemplateParams:
        data = dict(values)
        if "phases" in data:
            data["phases"] = tuple(Phase(p) for p in data["phases"])
        if "pipelines" in data:
            data["pipelines"] = PipelineSpace(data["pipelines"])
        if "tp_degrees" in data:
            data["tp_degrees"] = tuple(int(t) for t in data["tp_degrees"])
        if data.get("gpu_types") is not None:
            data["gpu_types"] = tuple(data["gpu_types"])
        return cls(**data)
