"""Registry of profiler backends, keyed by `BackendName`, and the per-job dispatch Dask maps."""

from __future__ import annotations

from collections.abc import Sequence

from planning.domain import Dtype, GpuType, ModelArch
from profiling.aic_backend import AicBackend
from profiling.analytic_backend import AnalyticBackend, analytic_results
from profiling.base_backend import BackendName, JobResult, ProfileJob, ProfilerBackend
from profiling.vllm_backend import VllmBackend

_REGISTRY: dict[BackendName, ProfilerBackend] = {
    BackendName.AIC: AicBackend(),
    BackendName.ANALYTIC: AnalyticBackend(),
    BackendName.VLLM: VllmBackend(),
}


def get_backend(name: BackendName | str) -> ProfilerBackend:
    """The backend called `name` (AUTO is resolved per pair by `resolve_backend`)."""
    try:
        key = BackendName(name)
    except ValueError:
        choices = ", ".join(b.value for b in BackendName)
        raise ValueError(f"unknown backend {name!r}; choose one of {choices}") from None
    if key is BackendName.AUTO:
        raise ValueError("backend 'auto' is resolved per (model, GPU); call resolve_backend")
    return _REGISTRY[key]


def resolve_backend(name: BackendName, model: ModelArch, gpu: GpuType, dtype: Dtype) -> BackendName:
    """AUTO -> aic where it covers the pair, else analytic; other names stay as they are."""
    if name is not BackendName.AUTO:
        return name
    return (
        BackendName.AIC
        if _REGISTRY[BackendName.AIC].covers(model, gpu, dtype)
        else (BackendName.ANALYTIC)
    )


def run_job(job: ProfileJob) -> JobResult:
    return _REGISTRY[job.backend].run(job)


def run_jobs(jobs: Sequence[ProfileJob]) -> list[JobResult]:
    """One Dask task: a chunk of jobs run in order in the worker process (analytic jobs of a
    chunk are evaluated together, vectorised over the layers each stage shape holds)."""
    if jobs and all(job.backend is BackendName.ANALYTIC for job in jobs):
        return analytic_results(jobs)
    return [run_job(job) for job in jobs]
