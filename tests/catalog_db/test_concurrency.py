"""Two real processes writing the same catalog file at once: both finish, no row lost."""

import multiprocessing as mp
from pathlib import Path

from catalog_db.connection import read_connection, write_transaction

ROWS_PER_WRITER = 40


def _writer(db_path: str, name: str) -> None:
    for i in range(ROWS_PER_WRITER):
        with write_transaction(db_path, timeout_s=120) as con:
            con.execute(
                "INSERT INTO workloads (workload_id, model, rate_req_per_s, mean_input_tokens, "
                "mean_output_tokens, ttft_slo_s, tpot_slo_s, source) VALUES (?, ?, 1, 1, 1, 1, 1, 'test')",
                [name, f"model-{i}"],
            )


def _reader(db_path: str, rounds: int) -> None:
    for _ in range(rounds):
        with read_connection(db_path, timeout_s=120) as con:
            con.execute("SELECT count(*) FROM workloads").fetchall()


def test_two_writers_and_a_reader_lose_nothing(catalog_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(str(catalog_path), "a")),
        ctx.Process(target=_writer, args=(str(catalog_path), "b")),
        ctx.Process(target=_reader, args=(str(catalog_path), 20)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with read_connection(catalog_path) as con:
        counts = dict(
            con.execute("SELECT workload_id, count(*) FROM workloads GROUP BY 1").fetchall()
        )
    assert counts == {"a": ROWS_PER_WRITER, "b": ROWS_PER_WRITER}
