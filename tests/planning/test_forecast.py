"""Holt / EWMA rate forecast with quantile headroom."""

from __future__ import annotations

import pytest

from planning.forecast import ForecastParams, backtest, forecast_demands, forecast_rate
from planning.workload import ModelSpec, make_trace, summarise


def test_constant_history_forecasts_itself_with_no_headroom() -> None:
    forecast = forecast_rate([4.0] * 10)
    assert forecast.point_req_per_s == pytest.approx(4.0)
    assert forecast.headroom_fraction == 0.0


def test_trend_is_followed_by_holt_but_lags_with_ewma() -> None:
    ramp = [float(t) for t in range(1, 21)]
    holt = forecast_rate(ramp, ForecastParams(alpha=0.8, beta=0.8)).point_req_per_s
    ewma = forecast_rate(ramp, ForecastParams(alpha=0.5, beta=0.0)).point_req_per_s
    assert holt == pytest.approx(21.0, abs=0.5)
    assert ewma < 20.0


def test_headroom_covers_the_quantile_of_past_under_forecasts() -> None:
    noisy = [10.0, 12.0, 9.0, 14.0, 10.0, 13.0, 8.0, 15.0, 10.0, 12.0] * 3
    result = backtest(noisy, ForecastParams(quantile=0.9))
    assert result.windows == len(noisy) - 3
    assert result.coverage >= 0.8
    assert result.mean_headroom_fraction > 0
    bare = backtest(noisy, ForecastParams(quantile=0.0))
    assert bare.coverage < result.coverage


def test_forecast_demands_per_model_uses_upper_rate_and_token_means() -> None:
    trace = make_trace("t", [(float(t), 200, 20) for t in range(600)], duration_s=600.0, model="m")
    (demand,) = forecast_demands(summarise(trace, 60.0), [ModelSpec("m", 1.0, 0.05)])
    assert demand.rate_req_per_s == pytest.approx(1.0)
    assert (demand.mean_input_tokens, demand.mean_output_tokens) == (200.0, 20.0)
