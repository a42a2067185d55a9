"""vLLM backend: command construction and parsing of `vllm bench latency` JSON."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from planning.domain import Dtype, Phase
from profiling.base_backend import BackendName, ProfileJob
from profiling.vllm_backend import (
    BenchSettings,
    dask_resources,
    decode_step_ms,
    latency_command,
    parse_latency_json,
    vllm_result,
)

RECORDED = Path(__file__).parent / "data" / "vllm_latency_prefill.json"


def job(models, gpus, phase=Phase.PREFILL, layers=None, dtype=Dtype.BF16) -> ProfileJob:
    arch = models["meta-llama/Llama-3.1-8B-Instruct"]
    return ProfileJob(arch, gpus["H100-SXM"], 2, layers or arch.num_layers, phase, dtype,
                      BackendName.VLLM, (1, 4), (128, 1024))  # fmt: skip


def test_command_has_the_bench_arguments(models, gpus) -> None:
    argv = latency_command(job(models, gpus), 4, 1024, 1, "/tmp/o.json", BenchSettings(iters=7))
    text = " ".join(argv)
    assert argv[:3] == ["vllm", "bench", "latency"]
    for expected in ("--model meta-llama/Llama-3.1-8B-Instruct", "--load-format dummy",
                     "--input-len 1024", "--output-len 1", "--batch-size 4", "-tp 2",
                     "--num-iters 7", "--output-json /tmp/o.json", "--dtype bfloat16"):  # fmt: skip
        assert expected in text
    assert "--hf-overrides" not in argv


def test_partial_stage_overrides_layers_and_fp8_quantizes(models, gpus) -> None:
    argv = latency_command(
        job(models, gpus, layers=8, dtype=Dtype.FP8), 1, 128, 1, "o", BenchSettings()
    )
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"num_hidden_layers": 8}
    assert argv[argv.index("--quantization") + 1] == "fp8"


def test_parses_recorded_vllm_json() -> None:
    parsed = parse_latency_json(RECORDED.read_text(), str(RECORDED))
    raw = json.loads(RECORDED.read_text())
    assert parsed.avg_latency_s == raw["avg_latency"]
    assert parsed.latencies_s == tuple(raw["latencies"])
    assert parsed.percentiles_s[50] == raw["percentiles"]["50"]


def test_malformed_json_names_the_file() -> None:
    with pytest.raises(ValueError, match=r"bad\.json"):
        parse_latency_json('{"latencies": []}', "bad.json")


def test_decode_step_is_the_slope_between_two_output_lengths() -> None:
    short = parse_latency_json(json.dumps({"avg_latency": 0.20, "latencies": [0.2]}))
    long = parse_latency_json(json.dumps({"avg_latency": 0.52, "latencies": [0.52]}))
    assert decode_step_ms(short, long, (8, 40)) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="decode step"):
        decode_step_ms(long, short, (8, 40))


class FakeHost:
    """Stands in for a GPU host: answers version queries, writes recorded-format JSON."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.commands.append(argv)
        if argv[:2] == ["vllm", "--version"]:
            return "0.11.2\n"
        if argv[0] == "nvidia-smi":
            return "NVIDIA H100 80GB HBM3\nNVIDIA H100 80GB HBM3\n"
        batch, inp, out = (
            int(argv[argv.index(f) + 1]) for f in ("--batch-size", "--input-len", "--output-len")
        )
        seconds = 0.001 * (batch * inp / 100 + out * (1 + batch / 10))
        data = json.loads(RECORDED.read_text()) | {"avg_latency": seconds}
        Path(argv[argv.index("--output-json") + 1]).write_text(json.dumps(data))
        return ""


def test_job_runs_every_point_through_the_host(models, gpus) -> None:
    host = FakeHost()
    result = vllm_result(job(models, gpus, Phase.DECODE), BenchSettings(), host)
    assert result.backend == "vllm" and result.backend_version == "vllm-0.11.2"
    assert result.measured_on == "NVIDIA H100 80GB HBM3"
    # decode step from the fake's model: 1 ms x (1 + batch / 10) per output token
    assert result.latency_ms[1][0] == pytest.approx(1 + 4 / 10)
    benches = [c for c in host.commands if c[:3] == ["vllm", "bench", "latency"]]
    assert len(benches) == 2 * 2 * 2  # 2 batches x 2 contexts x 2 output lengths
    prefill = vllm_result(job(models, gpus), BenchSettings(), FakeHost())
    assert prefill.latency_ms[0][1] == pytest.approx(1000 * 0.001 * (1024 / 100 + 1.1))


def test_vllm_jobs_ask_for_the_gpu_resource() -> None:
    assert dask_resources("H100-SXM") == {"GPU-H100-SXM": 1}


@pytest.mark.gpu
def test_real_vllm_bench_latency(models, gpus) -> None:
    if shutil.which("vllm") is None:
        pytest.skip("vllm not installed")
    small = ProfileJob(models["meta-llama/Llama-3.1-8B-Instruct"], gpus["H100-SXM"], 1, 4,
                       Phase.PREFILL, Dtype.BF16, BackendName.VLLM, (1,), (128,))  # fmt: skip
    result = vllm_result(small, BenchSettings(warmup_iters=1, iters=2))
    assert result.latency_ms[0][0] > 0 and result.measured_on
