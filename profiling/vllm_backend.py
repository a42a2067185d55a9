"""The vLLM backend: real latencies from `vllm bench latency` on a GPU host.

Prefill point (batch B, prompt L): `--input-len L --output-len 1 --batch-size B`, latency =
the run's mean (one prefill step plus sampling one token). Decode point (batch B, context C):
two runs at output lengths N1 < N2 from input C; step = (lat(N2) - lat(N1)) / (N2 - N1), at a
mean context of C + (N1 + N2) / 2 (recorded as C; the bias is under 1% for C >= 512).
`--load-format dummy` needs no weight download (only the model's config and tokenizer);
a stage holding fewer layers than the model runs with `--hf-overrides
'{"num_hidden_layers": n}'`. The output JSON of vllm/benchmarks/latency.py has `avg_latency`,
`std_latency`, `latencies` (s) and `percentiles` ({"10": s, ..., "99": s}).

Jobs run on a Dask worker started with `--resources "GPU-<type>=1"`; the command runner is
injected so that command construction and parsing are testable without a GPU.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from planning.domain import Dtype, GpuType, ModelArch, Phase
from profiling.analytic_backend import checked_memory, spec_of
from profiling.base_backend import BackendName, JobResult, ProfileJob

CommandRunner = Callable[[Sequence[str]], str]  # runs a command, returns its stdout

_DTYPE_ARGS = {
    Dtype.BF16: ("--dtype", "bfloat16"),
    Dtype.FP16: ("--dtype", "float16"),
    Dtype.FP8: ("--dtype", "bfloat16", "--quantization", "fp8"),
}


@dataclass(frozen=True, slots=True)
class BenchSettings:
    warmup_iters: int = 3
    iters: int = 10
    decode_output_lens: tuple[int, int] = (8, 40)
    gpu_memory_utilization: float = 0.9


@dataclass(frozen=True, slots=True)
class BenchLatency:
    """One `vllm bench latency --output-json` file (seconds)."""

    avg_latency_s: float
    latencies_s: tuple[float, ...]
    percentiles_s: dict[int, float] = field(default_factory=dict)


def parse_latency_json(text: str, source: str = "output") -> BenchLatency:
    """Parse vLLM's latency JSON; a malformed file raises ValueError naming `source`."""
    try:
        data = json.loads(text)
        avg = float(data["avg_latency"])
        latencies = tuple(float(x) for x in data["latencies"])
        percentiles = {int(k): float(v) for k, v in data.get("percentiles", {}).items()}
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{source}: not a vllm bench latency JSON ({error})") from None
    if not avg > 0:
        raise ValueError(f"{source}: avg_latency {avg} is not positive")
    return BenchLatency(avg, latencies, percentiles)


def latency_command(
    job: ProfileJob,
    batch_size: int,
    input_len: int,
    output_len: int,
    output_json: str,
    settings: BenchSettings,
) -> list[str]:
    """The `vllm bench latency` argv for one point of `job`."""
    argv = [
        "vllm", "bench", "latency",
        "--model", job.model.model,
        "--load-format", "dummy",
        "--input-len", str(input_len),
        "--output-len", str(output_len),
        "--batch-size", str(batch_size),
        "-tp", str(job.tp),
        "--max-model-len", str(input_len + output_len),
        "--gpu-memory-utilization", str(settings.gpu_memory_utilization),
        "--num-iters-warmup", str(settings.warmup_iters),
        "--num-iters", str(settings.iters),
        "--output-json", output_json,
        *_DTYPE_ARGS[job.dtype],
    ]  # fmt: skip
    if job.num_layers < job.model.num_layers:
        argv += ["--hf-overrides", json.dumps({"num_hidden_layers": job.num_layers})]
    return argv


def decode_step_ms(short: BenchLatency, long: BenchLatency, lens: tuple[int, int]) -> float:
    """One decode step (ms) from two runs that differ only in output length."""
    step = (long.avg_latency_s - short.avg_latency_s) / (lens[1] - lens[0]) * 1e3
    if not step > 0:
        raise ValueError(
            f"decode step from output lengths {lens} is {step:.4f} ms; rerun with more iterations"
        )
    return step


def _subprocess_runner(argv: Sequence[str]) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


def _measure(
    job: ProfileJob, b: int, s: int, settings: BenchSettings, runner: CommandRunner
) -> float:
    with tempfile.TemporaryDirectory(prefix="coral-vllm-") as tmp:

        def bench(output_len: int) -> BenchLatency:
            path = Path(tmp) / f"b{b}_s{s}_o{output_len}.json"
            runner(latency_command(job, b, s, output_len, str(path), settings))
            return parse_latency_json(path.read_text(encoding="utf-8"), str(path))

        if job.phase == Phase.PREFILL:
            return bench(1).avg_latency_s * 1e3
        n1, n2 = settings.decode_output_lens
        return decode_step_ms(bench(n1), bench(n2), (n1, n2))


def host_facts(runner: CommandRunner) -> tuple[str, str]:
    """(vLLM version, GPU name) of the host running the jobs."""
    version = runner(["vllm", "--version"]).strip().splitlines()[-1]
    gpu = runner(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()[0]
    return version.strip(), gpu.strip()


def vllm_result(
    job: ProfileJob,
    settings: BenchSettings | None = None,
    runner: CommandRunner = _subprocess_runner,
) -> JobResult:
    """Measure every point of `job`; memory figures come from the analytic model."""
    settings = settings or BenchSettings()
    memory = checked_memory(spec_of(job))
    version, gpu_name = host_facts(runner)
    latency = tuple(
        tuple(_measure(job, b, s, settings, runner) for s in job.seq_lens) for b in job.batch_sizes
    )
    return JobResult(
        job=job,
        backend=str(BackendName.VLLM),
        backend_version=f"vllm-{version}",
        latency_ms=latency,
        weights_gib=memory.weights_gib,
        kv_gib_per_token=memory.kv_gib_per_token,
        max_kv_tokens=memory.max_kv_tokens,
        measured_on=gpu_name,
    )


@dataclass(frozen=True, slots=True)
class VllmBackend:
    name: BackendName = BackendName.VLLM
    settings: BenchSettings = BenchSettings()

    def covers(self, model: ModelArch, gpu: GpuType, dtype: Dtype) -> bool:
        return gpu.vendor == "NVIDIA"  # nvidia-smi names the GPU; ROCm hosts are not wired

    def expected_version(self, job: ProfileJob) -> str | None:
        return None  # known only on the GPU host: any vllm rows count as done

    def run(self, job: ProfileJob) -> JobResult:
        return vllm_result(job, self.settings)


def dask_resources(gpu_type: str) -> dict[str, float]:
    """The worker resource a vLLM job needs: `dask worker ... --resources "GPU-<type>=1"`."""
    return {f"GPU-{gpu_type}": 1}
