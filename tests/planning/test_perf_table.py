import pytest
from hypothesis import given
from hypothesis import strategies as st

from planning.domain import Dtype, Phase, ProfilePoint
from planning.perf_table import OutOfProfileRange, build_tables, table_at_layers


def _points(backend: str = "analytic", scale: float = 1.0) -> list[ProfilePoint]:
    # latency = 2 ms per batch item + 0.01 ms per token of context: bilinear, so exact.
    return [
        ProfilePoint(
            "m",
            "H100-SXM",
            1,
            32,
            Phase.DECODE,
            Dtype.BF16,
            b,
            s,
            scale * (2.0 * b + 0.01 * s),
            backend,
            "1",
        )
        for b in (1, 8, 64)
        for s in (128, 1024, 8192)
    ]


def test_interpolates_between_grid_points() -> None:
    (table,) = build_tables(_points()).values()
    assert table.latency_s(8, 1024) == pytest.approx((16 + 10.24) / 1000)
    assert table.latency_s(4.5, 576) == pytest.approx((9 + 5.76) / 1000)


@given(st.floats(1, 64), st.floats(128, 8192))
def test_exact_on_bilinear_data(batch: float, seq: float) -> None:
    (table,) = build_tables(_points()).values()
    assert table.latency_s(batch, seq) == pytest.approx((2 * batch + 0.01 * seq) / 1000, rel=1e-9)


@pytest.mark.parametrize(("batch", "seq"), [(65, 128), (0.5, 128), (8, 9000), (8, 100)])
def test_never_extrapolates(batch: float, seq: float) -> None:
    (table,) = build_tables(_points()).values()
    with pytest.raises(OutOfProfileRange, match="outside profiled"):
        table.latency_s(batch, seq)


def test_prefers_fuller_then_measured_grid() -> None:
    tables = build_tables(_points("analytic", 1.0) + _points("vllm", 2.0))
    (table,) = tables.values()
    assert table.backend == "vllm"


def test_grid_with_hole_is_refused() -> None:
    with pytest.raises(ValueError, match="no point"):
        build_tables(_points()[:-1])


def _layered(layers: int) -> list[ProfilePoint]:
    # a fixed 1 ms per step plus 0.5 ms per layer per batch item; memory linear in layers
    return [
        ProfilePoint(
            "m",
            "L4",
            1,
            layers,
            Phase.PREFILL,
            Dtype.BF16,
            b,
            s,
            1.0 + 0.5 * layers * b + 0.001 * s,
            "analytic",
            "1",
            weights_gib=1.0 + 0.25 * layers,
            kv_gib_per_token=1e-5 * layers,
            max_kv_tokens=int((20.0 - (1.0 + 0.25 * layers)) / (1e-5 * layers)),
        )
        for b in (1, 4)
        for s in (128, 1024)
    ]


def test_table_at_layers_interpolates_latency_and_memory() -> None:
    tables = list(build_tables(_layered(8) + _layered(32)).values())
    mid = table_at_layers(tables, 20)
    assert mid.key.num_layers == 20
    assert mid.latency_s(4, 1024) == pytest.approx((1.0 + 0.5 * 20 * 4 + 1.024) / 1000)
    assert mid.weights_gib == pytest.approx(6.0)
    assert mid.max_kv_tokens == pytest.approx((20.0 - 6.0) / (1e-5 * 20), abs=1)


def test_table_at_layers_bounds() -> None:
    tables = list(build_tables(_layered(8) + _layered(32)).values())
    low = table_at_layers(tables, 3)
    assert low.latency_ms == tables[0].latency_ms or low.latency_ms == tables[1].latency_ms
    assert low.latency_s(1, 128) == pytest.approx(
        (1.0 + 0.5 * 8 + 0.128) / 1000
    )  # held, not scaled
    with pytest.raises(OutOfProfileRange, match="up to 32 layers"):
        table_at_layers(tables, 33)
