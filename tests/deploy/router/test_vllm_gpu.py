"""The router against real vLLM engines (NIXL connector, `kv_role: kv_both`): GPU only.

Start two engines first, e.g.
    vllm serve MODEL --port 8100 --kv-transfer-config \
        '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    (and the same on --port 8200 with VLLM_NIXL_SIDE_CHANNEL_PORT set apart)
then export CORAL_VLLM_PREFILL_URL=http://127.0.0.1:8100 CORAL_VLLM_DECODE_URL=... and
CORAL_VLLM_MODEL=MODEL. Skipped without a GPU or without those variables.
"""

from __future__ import annotations

import os

import httpx
import pytest

from deploy.router.app import create_app
from deploy.router.config import RouterConfig
from deploy.testing.fake_engine import ThreadedServer
from tests.deploy.router.conftest import PERF

pytestmark = pytest.mark.gpu


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} not set: no running vLLM engines to test against")
    return value


def test_pd_request_through_real_vllm_engines():
    prefill, decode, model = (
        _env(n) for n in ("CORAL_VLLM_PREFILL_URL", "CORAL_VLLM_DECODE_URL", "CORAL_VLLM_MODEL")
    )
    config = RouterConfig.model_validate({
        "ttft_slo_s": 2.0, "tpot_slo_s": 0.1, "perf": PERF,
        "fluidpd": {"fluid_token_enabled": False, "fluid_role_enabled": False},
        "instances": [{"id": "p0", "url": prefill, "role": "prefill"},
                      {"id": "d0", "url": decode, "role": "decode"}],
    })  # fmt: skip
    router = ThreadedServer(create_app(config)).start()
    try:
        body = {"model": model, "prompt": "The capital of France is", "max_tokens": 8}
        response = httpx.post(f"{router.url}/v1/completions", json=body, timeout=120)
        assert response.status_code == 200
        assert response.json()["usage"]["completion_tokens"] >= 1
        metrics = httpx.get(f"{decode}/metrics", timeout=10).text
        assert "vllm:num_requests_running" in metrics
    finally:
        router.stop()
