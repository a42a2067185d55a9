"""Template sets in a real DuckDB catalog: atomic, idempotent rebuilds and typed reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import upsert_points
from catalog_db.templates_io import (
    NoProfilesError,
    current_template_set,
    current_templates,
    rebuild_templates,
)
from planning.domain import Phase
from planning.perf_table import build_tables
from planning.templates.build import build_templates
from planning.templates.params import TemplateParams
from tests.planning.templates import synthetic as syn

# Real catalog names, synthetic roofline numbers: two seeded models on three seeded GPUs.
SMALL = "meta-llama/Llama-3.1-8B-Instruct"
LARGE = "meta-llama/Llama-3.1-70B-Instruct"
GPUS = ("H100-SXM", "L40S", "L4")


def _seed_profiles(db: Path, scale: float = 1.0) -> None:
    with read_connection(db) as con:
        from catalog_db import queries

        archs = [queries.model(con, SMALL), queries.model(con, LARGE)]
        gpus = [queries.gpu_type(con, g) for g in GPUS]
    points = [
        p.__class__(
            **{**{f: getattr(p, f) for f in p.__slots__}, "latency_ms": p.latency_ms * scale}
        )  # type: ignore[attr-defined]
        for p in syn.profile_points(archs, gpus, backend="analytic")
    ]
    with write_transaction(db) as con:
        upsert_points(con, points)


PARAMS = TemplateParams(phases=(Phase.PREFILL, Phase.DECODE, Phase.COLOCATED))


def test_rebuild_stores_what_the_pure_build_returns(catalog_path: Path) -> None:
    _seed_profiles(catalog_path)
    summary = rebuild_templates(catalog_path, PARAMS)
    assert summary.changed and summary.kept > 0
    assert set(summary.models) == {SMALL, LARGE}
    assert summary.evaluated >= summary.kept
    with read_connection(catalog_path) as con:
        stored = current_templates(con)
        from catalog_db import queries
        from catalog_db.profiles import read_points
        from catalog_db.templates_io import workload_classes

        expected = build_templates(
            [queries.model(con, LARGE), queries.model(con, SMALL)],
            queries.gpu_types(con),
            workload_classes(con),
            build_tables(read_points(con)),
            PARAMS,
        )
        row = current_template_set(con)
        gpus = con.execute("SELECT sum(gpu_count) FROM template_gpus").fetchone()
        costs = con.execute(
            "SELECT count(*), count(usd_per_million_tokens) FROM template_costs"
        ).fetchone()
        partition = con.execute(
            "SELECT pp_layer_partition, stages FROM templates LIMIT 1"
        ).fetchone()
    assert sorted(stored, key=lambda t: t.template_id) == sorted(
        expected.templates, key=lambda t: t.template_id
    )
    assert row is not None and row["kept"] == len(stored)
    assert row["params"]["params"]["max_stages_prefill"] == 4  # type: ignore[index]
    assert gpus is not None and gpus[0] == sum(t.total_gpus for t in stored)
    assert costs == (len(stored), len(stored))  # every seeded GPU has a reference price
    assert (partition is not None and "," in partition[0]) or partition[0].isdigit()


def test_rebuild_is_idempotent_and_replaces_atomically(catalog_path: Path) -> None:
    _seed_profiles(catalog_path)
    first = rebuild_templates(catalog_path, PARAMS)
    again = rebuild_templates(catalog_path, PARAMS)
    assert again.template_set_id == first.template_set_id and not again.changed
    _seed_profiles(catalog_path, scale=1.5)  # slower GPUs: new ratings, new set
    second = rebuild_templates(catalog_path, PARAMS)
    assert second.changed and second.template_set_id != first.template_set_id
    with read_connection(catalog_path) as con:
        sets = con.execute(
            "SELECT template_set_id, is_current FROM template_sets ORDER BY generated_at"
        ).fetchall()
        ids = {
            r[0] for r in con.execute("SELECT DISTINCT template_set_id FROM templates").fetchall()
        }
    assert sets == [(first.template_set_id, False), (second.template_set_id, True)]
    assert ids == {second.template_set_id}


def test_failed_write_keeps_the_old_set(
    catalog_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed_profiles(catalog_path)
    first = rebuild_templates(catalog_path, PARAMS)
    _seed_profiles(catalog_path, scale=2.0)
    import catalog_db.templates_io as io

    def broken(*args: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(io, "_gpus_frame", broken)  # fail after templates were inserted
    with pytest.raises(RuntimeError, match="disk full"):
        rebuild_templates(catalog_path, PARAMS)
    with read_connection(catalog_path) as con:
        row = current_template_set(con)
        count = con.execute("SELECT count(*) FROM templates").fetchone()
    assert row is not None and row["template_set_id"] == first.template_set_id
    assert count is not None and count[0] == first.kept


def test_partial_rebuild_carries_other_models(catalog_path: Path) -> None:
    _seed_profiles(catalog_path)
    rebuild_templates(catalog_path, PARAMS)
    with read_connection(catalog_path) as con:
        before = {t for t in current_templates(con, [LARGE])}
    summary = rebuild_templates(catalog_path, TemplateParams(max_stages_prefill=1), [SMALL])
    assert summary.models == (SMALL,) and summary.carried_over_models == (LARGE,)
    with read_connection(catalog_path) as con:
        assert set(current_templates(con, [LARGE])) == before
        small = current_templates(con, [SMALL])
    assert small and all(len(t.stages) == 1 for t in small)


def test_unknown_model_and_missing_profiles_are_named(catalog_path: Path) -> None:
    with pytest.raises(NoProfilesError, match="no profiles in the catalog"):
        rebuild_templates(catalog_path, PARAMS)
    _seed_profiles(catalog_path)
    with pytest.raises(KeyError, match="no/such-model"):
        rebuild_templates(catalog_path, PARAMS, ["no/such-model"])
    with pytest.raises(NoProfilesError, match="Qwen/Qwen3-8B"):
        rebuild_templates(catalog_path, PARAMS, ["Qwen/Qwen3-8B"])
    summary = rebuild_templates(catalog_path, PARAMS)
    assert "Qwen/Qwen3-8B" in summary.models_without_profiles


def test_no_set_reads_as_empty(catalog_path: Path) -> None:
    with read_connection(catalog_path) as con:
        assert current_templates(con) == ()
        assert current_template_set(con) is None
