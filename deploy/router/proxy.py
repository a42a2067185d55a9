"""Forwarding one OpenAI request through the deployment: FluidPD decides, the proxy carries out.

P/D: the prefill leg goes to the chosen prefill instance (`max_tokens=1`, `do_remote_decode`),
then the decode leg, with the `kv_transfer_params` the prefill leg returned, goes to the chosen
decode instance and is streamed back. FluidToken: the whole request goes to one decode instance.
Colocated-only pool: the whole request goes to the least-loaded instance (no FluidPD).

Failure handling: a connect error, a timeout or a 5xx from an instance marks it unhealthy for
`unhealthy_cooldown_s` and the leg is re-routed to another instance (at most `max_attempts`
instances per leg). A decode leg is retried only before its first byte reached the client. 4xx
answers are the client's problem and pass through. Clients cannot steer where KV is pulled
from: their `kv_transfer_params` are dropped.

Membership may change while a request is in flight (`PUT /admin/instances`): a leg already
sent finishes on its (retiring) worker; a decode leg whose chosen worker was removed during the
prefill leg goes to another decode worker.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
from fastapi.responses import JSONResponse, Response, StreamingResponse

from deploy.router.base_engine_adapter import EngineAdapter
from deploy.router.observability import RouterMetrics
from deploy.router.runtime import RouterRuntime, WorkerRuntime
from planning.routing.fluidpd_router import (
    ClusterView,
    NoWorkerAvailable,
    RouteDecision,
    RouteKind,
    WorkerRole,
    route_request,
    worker_decode_pressure,
)

CHARS_PER_TOKEN = 4.0  # English BPE average (OpenAI tokenizer guidance); a routing estimate only


class UpstreamFailed(Exception):
    """An instance did not answer usably (connect error, timeout, 5xx)."""

    def __init__(self, worker_id: str, detail: str) -> None:
        super().__init__(f"{worker_id}: {detail}")
        self.worker_id = worker_id


class UpstreamRefused(Exception):
    """An instance answered with a 4xx: passed back to the client as is."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of an OpenAI request: token-id lists counted, text at ~4 chars per token."""
    if "messages" in body:
        chars = sum(len(str(m.get("content", ""))) for m in body["messages"])
        return max(int(chars / CHARS_PER_TOKEN), 1)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return len(prompt)
    text = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
    return max(int(len(text) / CHARS_PER_TOKEN), 1)


@dataclass
class _Lease:
    """What one request added to a worker's accounting; released exactly once per part."""

    worker: WorkerRuntime
    local_prefill_tokens: float
    context_tokens: float
    decode_released: bool = False

    def take(self) -> _Lease:
        self.worker.decode_seqs += 1
        self.worker.decode_context_tokens += self.context_tokens
        self.worker.local_prefill_tokens += self.local_prefill_tokens
        return self

    def release_prefill(self) -> None:
        self.worker.local_prefill_tokens -= self.local_prefill_tokens
        self.local_prefill_tokens = 0.0

    def release(self) -> None:
        self.release_prefill()
        if not self.decode_released:
            self.decode_released = True
            self.worker.decode_seqs -= 1
            self.worker.decode_context_tokens -= self.context_tokens


class Proxy:
    """Routes and forwards requests for one deployment (one model's P/D pool)."""

    def __init__(
        self,
        runtime: RouterRuntime,
        adapter: EngineAdapter,
        client: httpx.AsyncClient,
        metrics: RouterMetrics,
    ) -> None:
        self.runtime = runtime
        self.adapter = adapter
        self.client = client
        self.metrics = metrics
        self.config = runtime.config
        self.routed: dict[str, int] = {}  # requests sent per colocated worker (tie-break)

    async def handle(self, api: str, body: dict[str, Any]) -> Response:
        """Serve one `/v1{api}` request; 503 when no instance could take it."""
        body = {k: v for k, v in body.items() if k != "kv_transfer_params"}
        prompt = estimate_prompt_tokens(body)
        output = int(
            body.get("max_tokens")
            or body.get("max_completion_tokens")
            or self.config.expected_output_tokens
        )
        tried: set[str] = set()
        try:
            for _ in range(self.config.max_attempts):
                decision = self._decide(prompt, tried)
                if decision is None:
                    break
                kind = "colocated" if self.runtime.colocated else decision.kind.value
                self.metrics.decisions.labels(kind=kind).inc()
                try:
                    return await self._forward(api, body, decision, prompt, output, tried)
                except UpstreamFailed as exc:
                    self._mark_failed(exc.worker_id, tried)
        except UpstreamRefused as exc:
            self.metrics.requests.labels(outcome="client_error").inc()
            return exc.response
        self.metrics.requests.labels(outcome="unavailable").inc()
        return JSONResponse({"error": {"message": "no instance could serve the request"}}, 503)

    def _view(self, tried: set[str]) -> ClusterView:
        view = self.runtime.view()
        workers = tuple(
            replace(w, healthy=False) if w.worker_id in tried else w for w in view.workers
        )
        return replace(view, workers=workers)

    def _decide(self, prompt: int, tried: set[str]) -> RouteDecision | None:
        if self.runtime.colocated:
            return self._colocated(tried)
        try:
            return route_request(self._view(tried), prompt, self.runtime.params)
        except NoWorkerAvailable:
            return None

    def _colocated(self, tried: set[str]) -> RouteDecision | None:
        """Least loaded (router's in-flight count, raised to the engine's running count) of
        the healthy colocated workers not yet tried; ties to the one sent fewest requests."""
        now = time.monotonic()
        live = [
            w
            for w in self.runtime.workers.values()
            if w.colocated and w.healthy(now) and w.worker_id not in tried
        ]
        if not live:
            return None
        best = min(
            live,
            key=lambda w: (
                w.load().running_seqs,
                w.local_prefill_tokens,
                self.routed.get(w.worker_id, 0),
            ),
        )
        self.routed[best.worker_id] = self.routed.get(best.worker_id, 0) + 1
        return RouteDecision(RouteKind.FLUID_TOKEN, None, best.worker_id, math.inf)

    def _mark_failed(self, worker_id: str, tried: set[str]) -> None:
        tried.add(worker_id)
        worker = self.runtime.workers.get(worker_id)
        if worker is not None:  # None: removed from the pool meanwhile
            worker.unhealthy_until_s = time.monotonic() + self.config.unhealthy_cooldown_s
        self.metrics.upstream_failures.labels(worker=worker_id).inc()

    async def _forward(
        self,
        api: str,
        body: dict[str, Any],
        decision: RouteDecision,
        prompt: int,
        output: int,
        tried: set[str],
    ) -> Response:
        if decision.kind is RouteKind.FLUID_TOKEN or decision.prefill_worker is None:
            worker = self.runtime.workers[decision.decode_worker]
            lease = _Lease(worker, float(prompt), prompt + output / 2)
            return await self._final_leg(api, self.adapter.local_body(body), lease, decision)
        prefilled = await self._prefill_leg(api, body, decision.prefill_worker)
        decode_body = self.adapter.decode_body(body, prefilled)
        first = decision.decode_worker
        for _ in range(self.config.max_attempts):
            worker = self.runtime.workers.get(first)
            if worker is None or worker.draining_to is not None:  # removed or flipping meanwhile
                first = self._other_decoder(tried) or ""
                if not first:
                    break
                continue
            lease = _Lease(worker, 0.0, prompt + output / 2)
            try:
                return await self._final_leg(api, decode_body, lease, decision)
            except UpstreamFailed as exc:
                self._mark_failed(exc.worker_id, tried)
                first = self._other_decoder(tried) or ""
                if not first:
                    break
        raise UpstreamFailed(decision.decode_worker, "no decode instance took the decode leg")

    def _other_decoder(self, tried: set[str]) -> str | None:
        view = self._view(tried)
        decoders = view.accepting(WorkerRole.DECODE)
        if not decoders:
            return None
        params = self.runtime.params
        return min(decoders, key=lambda w: worker_decode_pressure(w, view, params)).worker_id

    async def _prefill_leg(self, api: str, body: dict[str, Any], worker_id: str) -> dict[str, Any]:
        worker = self.runtime.workers[worker_id]
        prompt = estimate_prompt_tokens(body)
        worker.prefill_requests += 1
        worker.prefill_tokens += prompt
        try:
            leg = self.adapter.prefill_body(body, str(uuid.uuid4()))
            response = await self._post(worker, api, leg, self.config.prefill_timeout_s)
            content = response.content
        finally:
            worker.prefill_requests -= 1
            worker.prefill_tokens -= prompt
        return dict(json.loads(content))

    async def _post(
        self, worker: WorkerRuntime, api: str, body: dict[str, Any], read_timeout_s: float
    ) -> httpx.Response:
        try:
            response = await self.client.post(
                f"{worker.base_url}/v1{api}", json=body, timeout=self._timeout(read_timeout_s)
            )
        except httpx.TransportError as exc:
            raise UpstreamFailed(worker.worker_id, repr(exc)) from exc
        _check_status(worker, response, response.content)
        return response

    def _timeout(self, read_timeout_s: float) -> httpx.Timeout:
        return httpx.Timeout(read_timeout_s, connect=self.config.connect_timeout_s)

    async def _final_leg(
        self, api: str, body: dict[str, Any], lease: _Lease, decision: RouteDecision
    ) -> Response:
        """The leg that produces the answer: streamed through, or read whole and returned."""
        lease.take()
        worker = lease.worker
        request = self.client.build_request(
            "POST",
            f"{worker.base_url}/v1{api}",
            json=body,
            timeout=self._timeout(self.config.decode_timeout_s),
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            lease.release()
            raise UpstreamFailed(worker.worker_id, repr(exc)) from exc
        if response.status_code >= 400:
            content = await _read_or_release(response, lease)
            _check_status(worker, response, content)
        if body.get("stream"):
            self.metrics.requests.labels(outcome="ok").inc()
            return StreamingResponse(
                _relay(response, lease),
                status_code=response.status_code,
                media_type=response.headers.get("content-type", "text/event-stream"),
            )
        return await self._collect(response, lease, decision)

    async def _collect(
        self, response: httpx.Response, lease: _Lease, decision: RouteDecision
    ) -> Response:
        # A whole-body answer gives no first-token signal: free the local prefill accounting
        # after the policy's predicted TTFT instead.
        if lease.local_prefill_tokens and decision.predicted_ttft_s < float("inf"):
            asyncio.get_running_loop().call_later(decision.predicted_ttft_s, lease.release_prefill)
        try:
            content = await response.aread()
        except httpx.TransportError as exc:
            raise UpstreamFailed(lease.worker.worker_id, repr(exc)) from exc
        finally:
            await response.aclose()
            lease.release()
        self.metrics.requests.labels(outcome="ok").inc()
        return Response(
            content,
            status_code=response.status_code,
            media_type=response.headers.get("content-type", "application/json"),
        )


async def _read_or_release(response: httpx.Response, lease: _Lease) -> bytes:
    try:
        return await response.aread()
    except httpx.TransportError:
        return b""
    finally:
        await response.aclose()
        lease.release()


def _check_status(worker: WorkerRuntime, response: httpx.Response, content: bytes) -> None:
    if response.status_code >= 500:
        raise UpstreamFailed(worker.worker_id, f"HTTP {response.status_code}")
    if response.status_code >= 400:
        raise UpstreamRefused(
            Response(
                content,
                status_code=response.status_code,
                media_type=response.headers.get("content-type"),
            )
        )


async def _relay(response: httpx.Response, lease: _Lease) -> AsyncIterator[bytes]:
    """Stream the upstream body through; the first chunk ends the local prefill."""
    try:
        async for chunk in response.aiter_raw():
            if lease.local_prefill_tokens:
                lease.release_prefill()
            yield chunk
    finally:
        await response.aclose()
        lease.release()
