"""FluidPD elasticity parameters: every threshold the policy uses, named, with a default and why.

These are the values the deploy step writes into each router's config and the simulator sweeps.
Pressures are dimensionless: 1.0 means "at the SLO boundary" (see `planning.routing.pressure`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class FluidPDParams:
    """Thresholds of FluidToken and FluidRole.

    FluidToken (transient imbalance)
    - `fluid_token_enabled` (True): route whole requests to a decode worker that has TPOT slack.
    - `fluid_token_trigger_pressure` (0.8): only consider it once the best P/D path predicts a
      TTFT of 80 % of the SLO. Acting below 1.0 is the point of a pressure indicator: queues are
      caught before they break the SLO; 0.8 leaves room for prediction error (~20 %) without
      diverting requests that P/D would have served fine.
    - `fluid_token_max_decode_pressure` (0.8): a decode worker takes local prefill only while its
      own pressure is below this, so decode SLOs keep a 20 % margin for the extra sequence.
    - `fluid_token_max_step_share` (0.5): at most half of a decode step's SLO time may go to the
      prefill chunk; the rest stays for the running batch (Sarathi-style stall-free batching).
    - `fluid_token_ttft_margin` (0.9): the local prefill must finish within 90 % of the TTFT SLO
      by the perf model, or the request keeps the P/D path.

    FluidRole (sustained imbalance)
    - `fluid_role_enabled` (True): flip whole workers between prefill and decode.
    - `role_imbalance_on` (0.5): |p_P - p_D| above which one side counts as overloaded relative
      to the other; half an SLO of difference is well beyond the metric noise.
    - `role_imbalance_off` (0.25): below this the imbalance window resets (hysteresis: a signal
      hovering around the on-threshold does not restart and re-arm the window every tick).
    - `role_window_s` (5.0): the imbalance must persist this long; shorter bursts are FluidToken's
      job. Of the order of a few TTFT SLOs, long enough to skip one burst of arrivals.
    - `role_cooldown_s` (10.0): no second flip within this time of the last one, so the effect
      of a flip (drain plus queues re-balancing) is observed before acting again.
    - `role_donor_max_pressure` (0.9): the donor side's projected pressure after losing one worker
      (p × n / (n − 1)) must stay below this, or flipping would just move the SLO breach.
    - `min_prefill_instances` / `min_decode_instances` (1 / 1): never empty a role.

    Shared
    - `kv_high_watermark` (0.9): KV-cache usage counted as full (pressure 1.0); vLLM preempts near
      100 %, so 90 % leaves one batch step of head-room.
    - `probe_prompt_tokens` (1024): prompt size of the hypothetical "request arriving now" that the
      prefill pressure predicts a TTFT for (a typical chat prompt; the simulator sets the trace mean).
    """

    fluid_token_enabled: bool = True
    fluid_token_trigger_pressure: float = 0.8
    fluid_token_max_decode_pressure: float = 0.8
    fluid_token_max_step_share: float = 0.5
    fluid_token_ttft_margin: float = 0.9
    fluid_role_enabled: bool = True
    role_imbalance_on: float = 0.5
    role_imbalance_off: float = 0.25
    role_window_s: float = 5.0
    role_cooldown_s: float = 10.0
    role_donor_max_pressure: float = 0.9
    min_prefill_instances: int = 1
    min_decode_instances: int = 1
    kv_high_watermark: float = 0.9
    probe_prompt_tokens: int = 1024

    def __post_init__(self) -> None:
        if not 0 < self.kv_high_watermark <= 1:
            raise ValueError(f"kv_high_watermark must be in (0, 1], got {self.kv_high_watermark}")
        if not 0 < self.fluid_token_max_step_share <= 1:
            raise ValueError("fluid_token_max_step_share must be in (0, 1]")
        if self.role_imbalance_off > self.role_imbalance_on:
            raise ValueError("role_imbalance_off must not exceed role_imbalance_on (hysteresis)")
        if self.min_prefill_instances < 1 or self.min_decode_instances < 1:
            raise ValueError("each role keeps at least one instance")
        if self.role_window_s < 0 or self.role_cooldown_s < 0 or self.probe_prompt_tokens < 1:
            raise ValueError("windows and cooldowns are >= 0 s; probe_prompt_tokens >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FluidPDParams:
        """Build from a dict (a router config section); unknown keys raise ValueError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown FluidPD parameter(s): {', '.join(unknown)}")
        return cls(**values)

    def with_updates(self, **changes: Any) -> FluidPDParams:
        """A copy with some parameters changed (validated like a fresh one)."""
        return FluidPDParams.from_dict({**self.to_dict(), **changes})

    @classmethod
    def static(cls) -> FluidPDParams:
        """Neither mechanism: a static P/D deployment (the baseline)."""
        return cls(fluid_token_enabled=False, fluid_role_enabled=False)
