"""What the router needs from an inference engine, behind one protocol (vLLM today).

An adapter turns a client's OpenAI request into the engine's request shapes (P/D prefill leg,
P/D decode leg, a whole request on one instance), reads the engine's Prometheus metrics, and
performs a role switch if the engine needs to be told (vLLM with `kv_role: kv_both` does not:
the request shape decides; SGLang's `POST /pd_role_switch` or vLLM's proposed `POST /v1/pd_role`
would be called from `set_role`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from planning.routing.fluidpd_router import WorkerRole


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    """One scrape of an engine's /metrics, in engine-neutral terms (None: not reported).

    Means are cumulative (histogram sum / count since the engine started).
    """

    num_requests_running: float = 0.0
    num_requests_waiting: float = 0.0
    kv_cache_usage_frac: float | None = None
    ttft_mean_s: float | None = None
    inter_token_latency_mean_s: float | None = None
    prefill_time_mean_s: float | None = None
    prompt_tokens_total: float = 0.0
    generation_tokens_total: float = 0.0


class EngineAdapter(Protocol):
    """Engine-specific request shapes, metrics and role control."""

    metrics_path: str

    def prefill_body(self, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        """The P/D prefill leg: compute the prompt's KV cache, return one token."""
        ...

    def decode_body(self, body: dict[str, Any], prefill_response: dict[str, Any]) -> dict[str, Any]:
        """The P/D decode leg, pulling the KV cache the prefill leg left (its response)."""
        ...

    def local_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """A whole request on one instance (FluidToken: prefill locally, no KV transfer)."""
        ...

    def parse_metrics(self, text: str) -> EngineMetrics: ...

    async def set_role(self, client: httpx.AsyncClient, base_url: str, role: WorkerRole) -> None:
        """Tell the engine its new role after it drained (a no-op where the request shape
        alone decides, as with vLLM `kv_both`)."""
        ...
