"""Incremental readers on real files that grow, break and rotate under them."""

from __future__ import annotations

import os
from pathlib import Path

from ddp_tui.remote.backends.executor import Batch, LocalExecutor
from ddp_tui.remote.store.tail import (
    IncrementalFile,
    LogReader,
    MetricsReader,
    ProgressReader,
    parse_metrics_csv,
)
from ddp_tui.reports.text import collapse_carriage_returns

EX = LocalExecutor()


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_missing_file_then_lines_arrive(tmp_path: Path) -> None:
    log = tmp_path / "slurm-1.out"
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == []
    log.write_bytes(b"one\ntwo\n")
    assert reader.read_from(EX) == ["one", "two"]
    assert reader.read_from(EX) == []
    assert reader.offset == 8


def test_partial_last_line_is_held_back_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"epoch 1 done\nepoch 2 sta")
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == ["epoch 1 done"]
    assert reader.pending_text == "epoch 2 sta"
    _append(log, b"rted\r\nepoch")
    assert reader.read_from(EX) == ["epoch 2 started"]  # CRLF ending dropped too
    _append(log, b" 3\n")
    assert reader.read_from(EX) == ["epoch 3"]
    assert reader.pending_text == ""


def test_invalid_utf8_and_a_multibyte_char_split_across_reads(tmp_path: Path) -> None:
    log = tmp_path / "out"
    euro = "€".encode()  # 3 bytes
    log.write_bytes(b"bad \xff\xfe byte\nprice " + euro[:1])
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == ["bad \ufffd\ufffd byte"]
    _append(log, euro[1:] + b"5\n")
    assert reader.read_from(EX) == ["price €5"]


def test_truncation_restarts_from_the_beginning(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"a long first line\nsecond\n")
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == ["a long first line", "second"]
    gen = reader.generation
    with open(log, "wb") as fh:  # same inode, shorter content
        fh.write(b"new\n")
    assert reader.read_from(EX) == ["new"]
    assert reader.generation == gen + 1


def test_rotation_to_a_new_inode_restarts_even_if_the_new_file_is_longer(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"old\n")
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == ["old"]
    rotated = tmp_path / "out.new"
    rotated.write_bytes(b"fresh file line 1\nfresh file line 2\n")
    os.replace(rotated, log)
    assert reader.read_from(EX) == ["fresh file line 1", "fresh file line 2"]
    assert reader.generation == 1


def test_file_removed_and_recreated_is_read_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"first\n")
    reader = IncrementalFile(str(log))
    assert reader.read_from(EX) == ["first"]
    log.unlink()
    assert reader.read_from(EX) == []
    log.write_bytes(b"again, a longer line\n")  # may even reuse the inode
    assert reader.read_from(EX) == ["again, a longer line"]


def test_results_from_one_batch_for_several_readers_and_stale_results_ignored(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"a1\n")
    b.write_bytes(b"b1\nb2\n")
    ra, rb = IncrementalFile(str(a)), IncrementalFile(str(b))
    res = EX.run_batch(Batch(reads=[ra.request(), rb.request()])).reads
    assert ra.read_new(res[0]) == ["a1"]
    assert rb.read_new(res[1]) == ["b1", "b2"]
    # Feeding the same result again must not duplicate lines.
    assert ra.read_new(res[0]) == []


def test_max_bytes_catches_up_over_several_reads(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"".join(f"line {i}\n".encode() for i in range(100)))
    reader = IncrementalFile(str(log), max_bytes=64)
    got: list[str] = []
    for _ in range(50):
        got += reader.read_from(EX)
    assert got == [f"line {i}" for i in range(100)]


def test_tail_bytes_starts_a_big_log_near_its_end(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"".join(f"line {i:04d}\n".encode() for i in range(1000)))  # 10 bytes each
    reader = LogReader(str(log), tail_bytes=35)
    # 35 bytes before the end cuts into line 996; that cut-off line is dropped.
    assert reader.read_from(EX) == ["line 0997", "line 0998", "line 0999"]
    _append(log, b"line 1000\n")
    assert reader.read_from(EX) == ["line 1000"]


def test_collapse_carriage_returns_shows_the_final_progress_bar() -> None:
    assert collapse_carriage_returns("plain") == "plain"
    assert collapse_carriage_returns("\r 10%|#   \r 20%|##  \r 30%|### ") == " 30%|### "
    # Shorter overwrite leaves the tail of the longer text visible, as on a terminal.
    assert collapse_carriage_returns("abcdef\rXY") == "XYcdef"
    assert collapse_carriage_returns("done\r") == "done"


HEADER = "epoch,train_loss,val_acc,val_rmse,throughput_samples_per_sec\n"


def test_metrics_reader_parses_rows_and_holds_back_a_partial_row(tmp_path: Path) -> None:
    csv = tmp_path / "metrics.csv"
    csv.write_text(HEADER + "1,2.5,0.5,,100\n2,1.5,0.7")
    reader = MetricsReader(str(csv))
    assert reader.read_from(EX) == [
        {
            "epoch": 1.0,
            "train_loss": 2.5,
            "val_acc": 0.5,
            "val_rmse": None,
            "throughput_samples_per_sec": 100.0,
        }
    ]
    _append(csv, b",,120\nbroken,row\n3,1.0,0.8,,130\n")
    new = reader.read_from(EX)
    assert [r["epoch"] for r in new] == [2.0, 3.0]  # the malformed row is skipped
    assert [r["throughput_samples_per_sec"] for r in reader.rows] == [100.0, 120.0, 130.0]


def test_metrics_reader_starts_over_when_the_file_is_rewritten(tmp_path: Path) -> None:
    csv = tmp_path / "metrics.csv"
    csv.write_text(HEADER + "1,2.5,0.5,,100\n2,1.5,0.7,,120\n")
    reader = MetricsReader(str(csv))
    assert len(reader.read_from(EX)) == 2
    tmp = tmp_path / "m.tmp"
    tmp.write_text(HEADER + "1,9.0,0.1,,50\n")
    os.replace(tmp, csv)
    assert [r["train_loss"] for r in reader.read_from(EX)] == [9.0]
    assert [r["train_loss"] for r in reader.rows] == [9.0]


def test_parse_metrics_csv_of_a_whole_text() -> None:
    rows = parse_metrics_csv("\ufeff" + HEADER + "1,2,,0.3,10\n2,1,,0.2,")
    assert rows == [
        {
            "epoch": 1.0,
            "train_loss": 2.0,
            "val_acc": None,
            "val_rmse": 0.3,
            "throughput_samples_per_sec": 10.0,
        }
    ]
    assert parse_metrics_csv("") == []
    assert parse_metrics_csv(HEADER) == []


def test_progress_reader_skips_malformed_lines_and_keeps_the_latest(tmp_path: Path) -> None:
    prog = tmp_path / "progress.jsonl"
    prog.write_bytes(
        b'{"epoch": 1, "step": 10, "loss": 2.0}\n'
        b"not json\n"
        b"[1, 2]\n"
        b'{"epoch": 1, "step": 20, "loss": 1.5}\n'
        b'{"epoch": 1, "st'
    )
    reader = ProgressReader(str(prog))
    got = reader.read_from(EX)
    assert [p["step"] for p in got] == [10, 20]
    assert reader.latest == {"epoch": 1, "step": 20, "loss": 1.5}
    _append(prog, b'ep": 30, "loss": 1.2}\n')
    assert reader.read_from(EX) == [{"epoch": 1, "step": 30, "loss": 1.2}]
    assert reader.latest is not None and reader.latest["step"] == 30
