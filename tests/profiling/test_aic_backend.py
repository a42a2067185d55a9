"""AIConfigurator backend: real predictions, layer interpolation, versions, fallback."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from planning.domain import Phase
from profiling import aic_yaml
from profiling.aic_backend import AicBackend, _engine, _Target, aic_result, anchor_layers
from profiling.base_backend import BackendName, ProfileJob

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def job(models, gpus, model=LLAMA8, gpu="H100-SXM", tp=1, layers=None, phase=Phase.DECODE):
    arch = models[model]
    return ProfileJob(arch, gpus[gpu], tp, layers or arch.num_layers, phase, arch.default_dtype,
                      BackendName.AIC, (1, 16, 128), (128, 2048))  # fmt: skip


def test_predicts_vllm_latency_and_memory_for_a_covered_pair(models, gpus) -> None:
    result = aic_result(job(models, gpus))
    assert result.backend == "aic" and result.backend_version.startswith("aic-0.12")
    assert result.backend_version.endswith("+vllm-0.24.0")
    grid = np.asarray(result.latency_ms)
    assert np.all(grid > 0) and np.all(np.diff(grid, axis=0) > 0)
    assert result.weights_gib == pytest.approx(14.96, rel=0.01)  # 8.03e9 x 2 bytes
    assert result.kv_gib_per_token * 2**30 == pytest.approx(32 * 2 * 8 * 128 * 2)
    assert result.max_kv_tokens > 100_000


def test_interpolated_layer_counts_match_a_direct_compile(models, gpus) -> None:
    layers = 8
    assert layers not in anchor_layers(32)
    interpolated = aic_result(job(models, gpus, layers=layers, phase=Phase.PREFILL))
    direct = _engine(
        _Target("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", "0.24.0", 1, False), layers
    )
    for i, b in enumerate((1, 16, 128)):
        for j, s in enumerate((128, 2048)):
            expected = direct.predict_prefill_latency(b, s)
            assert interpolated.latency_ms[i][j] == pytest.approx(expected, rel=0.01)


def test_missing_kernel_data_falls_back_to_analytic_with_a_note(models, gpus) -> None:
    # AIConfigurator 0.12 has no a100_sxm vLLM MoE data for 128 experts at moe_tp 8.
    result = aic_result(job(models, gpus, "Qwen/Qwen3-30B-A3B", "A100-SXM-80GB", tp=8))
    assert result.backend == "analytic" and "aic failed" in result.note


def test_uncovered_pair_is_refused_naming_it(models, gpus) -> None:
    backend = AicBackend()
    assert not backend.covers(models[LLAMA8], gpus["T4"], models[LLAMA8].default_dtype)
    with pytest.raises(ValueError, match="'T4'"):
        backend.run(job(models, gpus, gpu="T4"))


def test_yaml_cache_parses_once_and_hands_out_private_copies(tmp_path) -> None:
    path = tmp_path / "system.yaml"
    path.write_text("data_dir: data/h100\nnested: {a: [1, 2.5, true]}\n")
    with path.open() as handle:
        first = aic_yaml.cached_safe_load(handle)
    first["nested"]["a"].append("mutated")
    with path.open() as handle:
        second = aic_yaml.cached_safe_load(handle)
    assert second == {"data_dir": "data/h100", "nested": {"a": [1, 2.5, True]}}
    assert second == yaml.safe_load(path.read_text())
