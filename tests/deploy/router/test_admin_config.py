"""Admin API protection, live parameter changes, and config validation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from pydantic import ValidationError

from deploy.router.app import create_app
from deploy.router.config import RouterConfig, load_config
from deploy.router.vllm_engine_adapter import VllmEngineAdapter, parse_vllm_metrics
from deploy.testing.fake_engine import ThreadedServer
from tests.deploy.router.conftest import HTTP, PERF, router_config

Start = Callable[[RouterConfig], ThreadedServer]


def _config(**overrides: object) -> RouterConfig:
    data = {
        "ttft_slo_s": 1.0,
        "tpot_slo_s": 0.05,
        "perf": PERF,
        "instances": [
            {"id": "p0", "url": "http://127.0.0.1:9", "role": "prefill"},
            {"id": "d0", "url": "http://127.0.0.1:9", "role": "decode"},
        ],
    }
    data.update(overrides)
    return RouterConfig.model_validate(data)


async def _get(app, client_host: str, path: str, headers: dict | None = None) -> int:
    transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://router") as client:
        return (await client.get(path, headers=headers or {})).status_code


def test_admin_without_token_refuses_non_loopback_clients():
    import asyncio

    app = create_app(_config())
    assert asyncio.run(_get(app, "203.0.113.7", "/admin/params")) == 403
    assert asyncio.run(_get(app, "127.0.0.1", "/admin/params")) == 200


def test_admin_with_token_needs_it_even_from_loopback(engines, start_router: Start):
    router = start_router(router_config(engines, admin_token="s3cret"))
    url = f"{router.url}/admin/params"
    assert HTTP.get(url).status_code == 401
    assert HTTP.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    auth = {"Authorization": "Bearer s3cret"}
    assert HTTP.get(url, headers=auth).json()["role_window_s"] == 5.0
    changed = HTTP.put(url, headers=auth, json={"role_window_s": 2.5})
    assert changed.status_code == 200 and changed.json()["role_window_s"] == 2.5
    assert HTTP.get(url, headers=auth).json()["role_window_s"] == 2.5
    assert HTTP.put(url, headers=auth, json={"no_such_knob": 1}).status_code == 400
    assert HTTP.put(url, headers=auth, json={"kv_high_watermark": 7}).status_code == 400


def test_config_loads_yaml_and_json(tmp_path: Path):
    data = _config(fluidpd={"role_window_s": 3.0}).model_dump(mode="json")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "r.json").write_text(json.dumps(data))
    for name in ("r.yaml", "r.json"):
        assert load_config(tmp_path / name).params().role_window_s == 3.0


@pytest.mark.parametrize(
    "overrides",
    [
        {"fluidpd": {"role_window": 3}},  # unknown parameter
        {"perf": {"prefill_fixed_s": 0.1}},  # incomplete perf model
        {"instances": [{"id": "p0", "url": "http://127.0.0.1:1", "role": "prefill"}] * 2},
        {
            "instances": [
                {"id": "p0", "url": "ftp://x", "role": "prefill"},
                {"id": "d0", "url": "http://127.0.0.1:1", "role": "decode"},
            ]
        },
    ],
)
def test_config_rejects_bad_files(overrides: dict):
    with pytest.raises(ValidationError):
        _config(**overrides)


VLLM_EXPOSITION = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1200.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 300.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 2.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 10.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.3
"""


def test_vllm_metrics_parse_sums_engines_and_keeps_the_fullest_kv_cache():
    m = parse_vllm_metrics(VLLM_EXPOSITION)
    assert m.num_requests_running == 5.0 and m.num_requests_waiting == 1.0
    assert m.kv_cache_usage_frac == 0.5
    assert m.prompt_tokens_total == 1200.0 and m.generation_tokens_total == 300.0
    assert m.ttft_mean_s == pytest.approx(0.5)
    assert m.inter_token_latency_mean_s == pytest.approx(0.03)
    assert m.prefill_time_mean_s is None


def test_vllm_adapter_builds_the_nixl_legs():
    adapter = VllmEngineAdapter()
    body = {
        "prompt": "hi",
        "max_tokens": 50,
        "stream": True,
        "min_tokens": 5,
        "stream_options": {"include_usage": True},
    }
    pre = adapter.prefill_body(body, "rid")
    assert pre["max_tokens"] == 1 and pre["stream"] is False
    assert pre["kv_transfer_params"]["do_remote_decode"] is True
    assert pre["kv_transfer_params"]["do_remote_prefill"] is False
    assert "min_tokens" not in pre and "stream_options" not in pre
    kv = {"do_remote_prefill": True, "remote_engine_id": "e1", "remote_block_ids": [1]}
    dec = adapter.decode_body(body, {"kv_transfer_params": kv})
    assert dec["kv_transfer_params"] == kv and dec["max_tokens"] == 50 and dec["min_tokens"] == 5
    assert "kv_transfer_params" not in adapter.local_body({**body, "kv_transfer_params": kv})
