"""The file source: YAML and CSV a user writes, validated with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from catalog_db.inventory.file_source import FileSource, InventoryFileError
from catalog_db.inventory.gpu_names import CatalogReference, load_reference
from catalog_db.inventory.snapshots import offers, snapshot_items, take_snapshot
from planning.domain import Pricing


@pytest.fixture
def reference(catalog_path: Path) -> CatalogReference:
    with read_connection(catalog_path) as con:
        return load_reference(con)


def test_bundled_example_reads(reference: CatalogReference) -> None:
    example = Path(__file__).parents[3] / "catalog_db/data/inventory/example_inventory.yaml"
    read = FileSource(example).read(reference)
    by_type = {i.instance_type: i for i in read.items}
    # g5.xlarge's GPU comes from the catalog's instance_types, the others from the file.
    assert by_type["g5.xlarge"].gpu_type == "A10G" and by_type["g5.xlarge"].gpu_count == 1
    assert by_type["g5.xlarge"].pricing is Pricing.SPOT
    assert by_type["dgx-h100"].available_count == 2
    assert all(i.provenance.startswith("file example_inventory.yaml:") for i in read.items)


def test_malformed_yaml_rows_name_file_line_and_field(
    reference: CatalogReference, tmp_path: Path
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "offers:\n"
        "  - instance_type: box-a\n"  # line 2
        "    region: lab\n"
        "    count: -1\n"  # line 4: negative
        "    price_usd_per_hr: 2.0\n"
        "    gpu_type: L4\n"
        "    gpu_count: 1\n"
        "  - instance_type: box-b\n"  # line 8: no region
        "    count: 1\n"
        "    price_usd_per_hr: 1.0\n"
        "    gpu_type: L4\n"
        "    gpu_count: 1\n"
        "  - instance_type: mystery.large\n"  # line 13: no GPU info, unknown type
        "    region: lab\n"
        "    count: 1\n"
        "    price_usd_per_hr: 1.0\n"
        "    pricing: reserved\n"  # line 17: not a pricing class
    )
    with pytest.raises(InventoryFileError) as caught:
        FileSource(path).read(reference)
    problems = caught.value.problems
    assert any(p.startswith("pool.yaml:4: field 'count'") for p in problems), problems
    assert any(p.startswith("pool.yaml:8: field 'region'") for p in problems), problems
    assert any(p.startswith("pool.yaml:17: field 'pricing'") for p in problems), problems


def test_malformed_csv_rows_and_duplicates(reference: CatalogReference, tmp_path: Path) -> None:
    path = tmp_path / "pool.csv"
    path.write_text(
        "instance_type,region,count,price_usd_per_hr,gpu_type,gpu_count\n"
        "box-a,lab,2,abc,L4,1\n"  # line 2: price not a number
        "box-b,lab,2,1.5,L4,1\n"
        "box-b,lab,3,1.5,L4,1\n"  # line 4: duplicate of line 3
        "box-c,lab,1,1.0,L4,1,extra\n"  # line 5: more values than the header
        "mystery.large,lab,1,1.0,,\n"  # line 6: GPU unknown and not given
    )
    with pytest.raises(InventoryFileError) as caught:
        FileSource(path).read(reference)
    text = str(caught.value)
    assert "pool.csv:2: field 'price_usd_per_hr'" in text
    assert "pool.csv:4: field 'instance_type': duplicate row (first on line 3)" in text
    assert "pool.csv:5: field '<row>'" in text
    assert "pool.csv:6: field 'gpu_type'" in text


def test_unknown_gpu_type_in_file_is_kept_and_flagged(catalog_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "pool.csv"
    path.write_text(
        "cloud,instance_type,region,zone,count,price_usd_per_hr,gpu_type,gpu_count\n"
        "onprem,mi355-box,lab,z1,4,9.0,MI355X,8\n"
        "onprem,l4-box,lab,z1,3,1.0,L4,1\n"
        "onprem,l4-box,lab,z2,5,0.8,L4,1\n"
    )
    result = take_snapshot(catalog_path, "file", path=path)
    assert result.snapshot is not None and result.snapshot.status == "ok"
    with read_connection(catalog_path) as con:
        items = snapshot_items(con, result.snapshot.snapshot_id)
        planner = offers(con, result.snapshot.snapshot_id)
    mi = next(i for i in items if i.instance_type == "mi355-box")
    assert mi.gpu_type is None and not mi.known_gpu and "MI355X" in mi.provenance
    # Two zones of one region become one offer: machines summed, cheapest price.
    assert [(o.instance_type, o.available_count, o.price_usd_per_hr) for o in planner] == [
        ("l4-box", 3 + 5, min(1.0, 0.8))
    ]


def test_bad_file_through_take_snapshot_is_a_failed_read(
    catalog_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text("offers: [ {instance_type: x, region: r, count: 1, price_usd_per_hr: 0} ]\n")
    result = take_snapshot(catalog_path, "file", path=path)
    assert result.snapshot is None and result.stale
    assert result.attempt.status == "failed"
    assert result.error is not None and "pool.yaml:1: field 'price_usd_per_hr'" in result.error
