"""Demand forecast for replanning: Holt's linear smoothing with an empirical quantile headroom.

From a model's recent per-window request rates r_1..r_t (req/s, from `workload.summarise`):
    level_t = α·r_t + (1-α)·(level_{t-1} + trend_{t-1})
    trend_t = β·(level_t - level_{t-1}) + (1-β)·trend_{t-1}
    point forecast of r_{t+1} = max(level_t + trend_t, 0)
β = 0 gives plain EWMA. The headroom is the q-quantile of the past one-step-ahead relative
errors (r_{i+1} / forecast_i - 1, floored at 0): provisioning point·(1 + headroom) would have
covered a fraction ≈ q of the past windows. Pure Python (a dozen points per model do not need
statsmodels); `backtest` measures the error on a history, e.g. the Azure traces per minute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planning.domain import ModelDemand
from planning.workload import ModelSpec, WindowSummary, percentile


@dataclass(frozen=True, slots=True)
class ForecastParams:
    """Smoothing weights in [0, 1], the headroom quantile, and the fewest windows to use."""

    alpha: float = 0.5
    beta: float = 0.1
    quantile: float = 0.9
    min_history: int = 3


@dataclass(frozen=True, slots=True)
class Forecast:
    """Next-window rate: the point forecast and the provisioned (point x (1 + headroom))."""

    point_req_per_s: float
    upper_req_per_s: float
    headroom_fraction: float


@dataclass(frozen=True, slots=True)
class ForecastError:
    """One-step-ahead error of a forecaster over a history of windows."""

    windows: int
    mape: float  # mean |actual - point| / actual, windows with actual > 0
    rmse_req_per_s: float
    coverage: float  # fraction of windows with actual <= upper forecast
    mean_headroom_fraction: float


def _smooth(history: Sequence[float], params: ForecastParams) -> list[float]:
    """One-step-ahead point forecasts: element i forecasts history[i] from history[:i] (i >= 1)."""
    level, trend = history[0], 0.0
    out = [history[0]]
    for value in history[1:]:
        out.append(max(level + trend, 0.0))
        previous = level
        level = params.alpha * value + (1 - params.alpha) * (level + trend)
        trend = params.beta * (level - previous) + (1 - params.beta) * trend
    out.append(max(level + trend, 0.0))
    return out


def _relative_errors(history: Sequence[float], points: Sequence[float]) -> list[float]:
    return [max(a / p - 1.0, 0.0) for a, p in zip(history[1:], points[1:], strict=False) if p > 0]


def forecast_rate(history: Sequence[float], params: ForecastParams | None = None) -> Forecast:
    """Forecast the next window's rate from per-window rates (oldest first)."""
    chosen = params or ForecastParams()
    if not history:
        return Forecast(0.0, 0.0, 0.0)
    points = _smooth(history, chosen)
    errors = _relative_errors(history, points[: len(history)])
    headroom = percentile(errors, chosen.quantile) if len(errors) >= chosen.min_history else 0.0
    point = points[-1]
    return Forecast(point, point * (1.0 + headroom), headroom)


def backtest(history: Sequence[float], params: ForecastParams | None = None) -> ForecastError:
    """Replay the history: forecast each window from the ones before it (after min_history)."""
    chosen = params or ForecastParams()
    abs_pct, squares, covered, headrooms = [], [], 0, []
    for t in range(chosen.min_history, len(history)):
        forecast = forecast_rate(history[:t], chosen)
        actual = history[t]
        if actual > 0:
            abs_pct.append(abs(actual - forecast.point_req_per_s) / actual)
        squares.append((actual - forecast.point_req_per_s) ** 2)
        covered += actual <= forecast.upper_req_per_s + 1e-12
        headrooms.append(forecast.headroom_fraction)
    n = len(squares)
    return ForecastError(
        windows=n,
        mape=sum(abs_pct) / len(abs_pct) if abs_pct else 0.0,
        rmse_req_per_s=math.sqrt(sum(squares) / n) if n else 0.0,
        coverage=covered / n if n else 1.0,
        mean_headroom_fraction=sum(headrooms) / n if n else 0.0,
    )


def forecast_demands(
    summaries: Sequence[WindowSummary],
    specs: Sequence[ModelSpec],
    params: ForecastParams | None = None,
) -> tuple[ModelDemand, ...]:
    """Next-window `ModelDemand` per model: the upper rate forecast, token means of the history.

    Token means are request-weighted over the history's windows; models with no request in
    the history are left out.
    """
    out = []
    for spec in specs:
        rows = sorted(
            (s for s in summaries if s.model == spec.model), key=lambda s: s.window_start_s
        )
        total = sum(s.requests for s in rows)
        if total == 0:
            continue
        forecast = forecast_rate([s.rate_req_per_s for s in rows], params)
        mean_in = sum(s.mean_input_tokens * s.requests for s in rows) / total
        mean_out = sum(s.mean_output_tokens * s.requests for s in rows) / total
        out.append(
            ModelDemand(
                model=spec.model,
                rate_req_per_s=forecast.upper_req_per_s,
                mean_input_tokens=mean_in,
                mean_output_tokens=mean_out,
                ttft_slo_s=spec.ttft_slo_s,
                tpot_slo_s=spec.tpot_slo_s,
                workload_class=spec.workload_class,
                priority=spec.priority,
            )
        )
    return tuple(out)
