import numpy as np
import pytest

from planning.domain import Phase
from planning.perf_table import OutOfProfileRange, build_tables
from planning.templates.stage_model import MissingMemoryData, stage_model
from tests.planning.templates import synthetic as syn


def _model(gpu=syn.BIG_GPU, tp: int = 1, phase: Phase = Phase.PREFILL, arch=syn.SMALL):  # type: ignore[no-untyped-def]
    tables = build_tables(syn.profile_points([arch], [gpu]))
    mine = [t for k, t in tables.items() if k.tp == tp and k.phase is phase]
    return stage_model(mine)


def test_latency_interpolates_linearly_between_profiled_layer_counts() -> None:
    m = _model()
    assert m is not None and m.layer_counts == (4, 8, 16, 32)
    lat = m.latency_by_layers(4, 1024)
    direct = {n: syn.latency_ms(syn.SMALL, syn.BIG_GPU, 1, n, Phase.PREFILL, 4, 1024) / 1e3
              for n in (8, 16, 24)}  # fmt: skip
    assert lat[15] == pytest.approx(direct[16])
    # synthetic latency is exactly linear in layers, so interpolation is exact in between
    assert lat[23] == pytest.approx(direct[24])
    assert np.all(np.diff(lat) >= 0)


def test_below_smallest_profiled_count_is_clamped_not_extrapolated() -> None:
    m = _model()
    assert m is not None
    lat = m.latency_by_layers(1, 1024)
    assert lat[0] == lat[3]  # 1 layer is rated as slow as the 4 profiled layers
    assert len(lat) == m.max_layers == 32


def test_out_of_profile_range_raises() -> None:
    m = _model()
    assert m is not None
    with pytest.raises(OutOfProfileRange):
        m.latency_by_layers(64, 1024)


def test_capacity_falls_with_layers_and_matches_profiles() -> None:
    m = _model(syn.MID_GPU, 1, Phase.DECODE)
    assert m is not None
    caps = np.asarray(m.capacity_tokens)
    assert np.all(np.diff(caps) <= 0)
    for n in m.layer_counts:
        _, _, max_kv = syn._memory(syn.SMALL, syn.MID_GPU, 1, n)
        assert caps[n - 1] == pytest.approx(max_kv, rel=1e-5)  # usable is the min over rows
    assert m.max_layers_for(caps[31]) == 32
    assert m.max_layers_for(caps[31] + 1) < 32


def test_shape_that_never_fits_is_dropped() -> None:
    assert _model(syn.SMALL_GPU, 1, Phase.PREFILL, syn.LARGE) is not None  # small counts fit
    tiny = syn.gpu("TINY", 2, 300, 100, 1)
    assert _model(tiny, 1, Phase.PREFILL, syn.LARGE) is None


def test_missing_memory_fields_are_refused() -> None:
    points = [
        p.__class__(**{**{f: getattr(p, f) for f in p.__slots__}, "weights_gib": None})  # type: ignore[attr-defined]
        for p in syn.profile_points([syn.SMALL], [syn.BIG_GPU])
    ]
    tables = [t for k, t in build_tables(points).items() if k.tp == 1 and k.phase is Phase.PREFILL]
    with pytest.raises(MissingMemoryData, match="weights_gib"):
        stage_model(tables)
