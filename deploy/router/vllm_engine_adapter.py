"""vLLM engines with the NIXL connector: request shapes of its P/D flow and its metric names.

Flow (vLLM `tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`): the prefill leg is
the client's request with `max_tokens=1`, no streaming, and
`kv_transfer_params={"do_remote_decode": true, "do_remote_prefill": false, ...None}`; the
decode leg is the client's request with the `kv_transfer_params` the prefill response returned.
Instances run `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`
so any of them can take either leg: FluidRole only changes which leg the router sends.

Metric names (vLLM v1 `vllm/v1/metrics/loggers.py`): gauges `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (a 0..1 fraction despite the name);
histograms `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds` (older:
`vllm:time_per_output_token_seconds`), `vllm:request_prefill_time_seconds`; counters
`vllm:prompt_tokens` and `vllm:generation_tokens` (exposed with a `_total` suffix). Values of
several engines (data-parallel `engine` label) are summed, except KV usage (max).
"""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from deploy.router.base_engine_adapter import EngineMetrics
from planning.routing.fluidpd_router import WorkerRole

_PREFILL_KV_PARAMS = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
# Not supported on the prefill leg (toy proxy): restored for the decode leg.
_DECODE_ONLY_FIELDS = ("min_tokens", "min_completion_tokens", "stream_options")


class VllmEngineAdapter:
    """`EngineAdapter` for vLLM (OpenAI server + NixlConnector, `kv_both`)."""

    metrics_path = "/metrics"

    def prefill_body(self, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        out = {k: v for k, v in body.items() if k not in _DECODE_ONLY_FIELDS}
        out["kv_transfer_params"] = dict(_PREFILL_KV_PARAMS)
        out["stream"] = False
        out["max_tokens"] = 1
        if "max_completion_tokens" in out:
            out["max_completion_tokens"] = 1
        return out

    def decode_body(self, body: dict[str, Any], prefill_response: dict[str, Any]) -> dict[str, Any]:
        out = dict(body)
        params = prefill_response.get("kv_transfer_params")
        if params:
            out["kv_transfer_params"] = params
        else:
            out.pop("kv_transfer_params", None)  # engine did not hand KV over: decode recomputes
        return out

    def local_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k != "kv_transfer_params"}

    def parse_metrics(self, text: str) -> EngineMetrics:
        return parse_vllm_metrics(text)

    async def set_role(self, client: httpx.AsyncClient, base_url: str, role: WorkerRole) -> None:
        return None  # kv_both: the next request's shape is the role


def parse_vllm_metrics(text: str) -> EngineMetrics:
    """Read the router-relevant vLLM metrics from a Prometheus text exposition."""
    values: dict[str, float] = {}
    kv: list[float] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:kv_cache_usage_perc":
                kv.append(sample.value)
            else:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return EngineMetrics(
        num_requests_running=values.get("vllm:num_requests_running", 0.0),
        num_requests_waiting=values.get("vllm:num_requests_waiting", 0.0),
        kv_cache_usage_frac=max(kv) if kv else None,
        ttft_mean_s=_mean(values, "vllm:time_to_first_token_seconds"),
        inter_token_latency_mean_s=_mean(values, "vllm:inter_token_latency_seconds")
        or _mean(values, "vllm:time_per_output_token_seconds"),
        prefill_time_mean_s=_mean(values, "vllm:request_prefill_time_seconds"),
        prompt_tokens_total=values.get("vllm:prompt_tokens_total", 0.0),
        generation_tokens_total=values.get("vllm:generation_tokens_total", 0.0),
    )


def _mean(values: dict[str, float], histogram: str) -> float | None:
    count = values.get(f"{histogram}_count", 0.0)
    return values.get(f"{histogram}_sum", 0.0) / count if count else None
