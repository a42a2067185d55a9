"""Mutable per-instance state, local to one simulation run (never escapes `engine.run`).

One `InstanceState` can act as a prefill engine (batched prefill under a token budget, issue
interval = slowest pipeline stage) or a decode engine (continuous batching, plus chunked
prefill of locally routed prompts, which makes it a colocated vLLM instance). Its role says
which; a role flip swaps them once the instance is drained.

Decode bookkeeping is O(1) per step: a step counter `counter`; a running request that joined at
counter c with prompt p has context p + 1 + (counter - c), so the batch's total context is
`ctx_base + n * counter`; completions come off a heap keyed by the counter at which each one
has produced its last token. While nothing joins or leaves, steps are simulated in one
"macro step" of k steps (k = steps until the next completion) whose step time is evaluated at
the mean context of its middle step: exact where the perf table is linear in context between
grid points. An arrival in the middle of a macro step truncates it at the next step boundary.
"""

from __future__ import annotations

import heapq
from collections import deque

from planning.domain import Phase
from planning.routing.base_router import InstanceView
from planning.routing.instance_perf import InstancePerf


class InstanceState:
    """Queues, batch and counters of one instance (mutable, run-local)."""

    __slots__ = (
        "accepting",
        "busy",
        "busy_s",
        "chunk_tokens",
        "chunks",
        "cloud",
        "counter",
        "ctx_base",
        "end_counter",
        "expected",
        "finishing",
        "id",
        "inflight",
        "joining",
        "kv_reserved",
        "last_done_s",
        "macro_c0",
        "macro_dt",
        "macro_k",
        "macro_t0",
        "n",
        "pending_requested_s",
        "pending_role",
        "perf",
        "prefill_free_at_s",
        "prefill_tps",
        "queue",
        "queued_tokens",
        "region",
        "role",
        "slots",
        "step_chunks",
        "version",
        "view",
        "waiting",
        "waiting_local_tokens",
    )

    def __init__(
        self, instance_id: int, perf: InstancePerf, role: Phase, region: str = "", cloud: str = ""
    ) -> None:
        self.id = instance_id
        self.region = region
        self.cloud = cloud
        self.perf = perf
        self.prefill_tps = _prefill_tps(perf)
        self.role = role
        self.accepting = True
        self.pending_role: Phase | None = None
        self.pending_requested_s = 0.0
        self.busy_s = 0.0
        self.view: InstanceView | None = None  # cached router view; None = stale
        # prefill engine
        self.queue: deque[int] = deque()
        self.queued_tokens = 0
        self.prefill_free_at_s = 0.0
        self.inflight: deque[list[int]] = deque()
        self.last_done_s = 0.0
        # decode engine
        self.n = 0
        self.counter = 0
        self.ctx_base = 0
        self.finishing: list[tuple[int, int]] = []  # (finish counter, request index)
        self.kv_reserved = 0
        self.slots = 0  # admitted requests: in transfer, chunking or running
        self.expected = 0  # routed here, still being prefilled elsewhere
        self.waiting: deque[tuple[int, bool]] = deque()  # (request, local prefill?)
        self.waiting_local_tokens = 0
        self.chunks: deque[list[int]] = deque()  # [request, prompt tokens left]
        self.chunk_tokens = 0
        self.step_chunks: list[int] = []  # prompts whose last chunk runs in this step
        self.joining: list[int] = []
        self.busy = False  # a prefill issue interval or a decode step is in progress
        self.version = 0
        self.macro_t0 = 0.0
        self.macro_c0 = 0
        self.macro_k = 0
        self.macro_dt = 0.0
        self.end_counter = 0

    def join(self, req: int, prompt_tokens: int, decode_steps: int) -> None:
        """Add a request to the running batch at the current step boundary."""
        self.n += 1
        self.ctx_base += prompt_tokens + 1 - self.counter
        heapq.heappush(self.finishing, (self.counter + decode_steps, req))

    def leave(self, prompt_tokens: int, joined_counter: int, kv_tokens: int) -> None:
        self.n -= 1
        self.ctx_base -= prompt_tokens + 1 - joined_counter
        self.kv_reserved -= kv_tokens
        self.slots -= 1

    def mean_context(self, steps_ahead: float = 0.0) -> float:
        if self.n == 0:
            return 0.0
        return (self.ctx_base + self.n * (self.counter + steps_ahead)) / self.n

    def drained(self) -> bool:
        if self.role is Phase.PREFILL:
            return not self.queue and not self.inflight and not self.busy
        return (
            self.n == 0
            and self.slots == 0
            and self.expected == 0
            and not self.waiting
            and not self.busy
        )

    def make_view(self, now_s: float) -> InstanceView:
        if self.busy and not self.step_chunks and self.role is not Phase.PREFILL:
            batch_step_s = self.macro_dt  # the running macro step's time at this batch
        elif self.n:
            batch_step_s = self.perf.decode_step_s(self.n, self.mean_context())
        else:
            batch_step_s = 0.0
        return InstanceView(
            instance_id=self.id,
            model=self.perf.model,
            role=self.role,
            accepting=self.accepting,
            pending_role=self.pending_role,
            queued_prompt_tokens=self.queued_tokens + self.chunk_tokens + self.waiting_local_tokens,
            prefill_tokens_per_s=self.prefill_tps,
            prefill_busy_until_s=self.prefill_free_at_s,
            decode_batch=self.n,
            decode_waiting=len(self.waiting),
            mean_context_tokens=self.mean_context(),
            kv_used_tokens=self.kv_reserved,
            kv_capacity_tokens=self.perf.kv_capacity_tokens,
            step_time_s=batch_step_s,
            perf=self.perf,
            region=self.region,
            cloud=self.cloud,
        )


def _prefill_tps(perf: InstancePerf) -> float:
    """Nominal prefill tokens/s, 0 for an instance without a prefill profile."""
    try:
        return perf.prefill_tokens_per_s
    except ValueError:
        return 0.0
