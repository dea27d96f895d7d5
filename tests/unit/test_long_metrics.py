"""A 100,000-row ``metrics.csv`` (issue 21): read incrementally, plotted from a bounded
sample, and handed to Run detail as its newest rows only. Real files throughout."""

from __future__ import annotations

from pathlib import Path

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import Batch, BatchResult, LocalExecutor
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.groups.comparison import load_group
from ddp_tui.remote.model.views import DETAIL_METRICS_ROWS
from ddp_tui.remote.observe.followers import MetricsCache
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.remote.store.tail import (
    PLOT_BUCKETS,
    MetricsReader,
    PlotSample,
    parse_metrics_csv,
    plot_sample,
)
from tests.helpers.long_metrics import (
    HEADER,
    SPIKE_EPOCH,
    SPIKE_LOSS,
    finished_run,
    metrics_row,
    metrics_text,
)

EX = LocalExecutor()
ROWS = 100_000
MOST_POINTS = 2 * PLOT_BUCKETS + 2


def _catch_up(reader: MetricsReader) -> None:
    """Read until the reader has every complete line of its file."""
    for _ in range(1000):
        if not reader.read_from(EX):
            return
    raise AssertionError("the reader never caught up")


def test_incremental_parse_equals_the_whole_parse_with_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    torn = metrics_row(60_001)
    path.write_text(HEADER + metrics_text(60_000) + torn[:9])  # row 60,001 cut mid-cell
    reader = MetricsReader(str(path), max_bytes=1 << 20, sample=True)  # many reads
    _catch_up(reader)
    assert len(reader.rows) == 60_000  # the torn row is held back, not parsed half
    assert reader.rows[-1]["epoch"] == 60_000.0
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(torn[9:] + metrics_text(20_000, first=60_002))
    _catch_up(reader)
    last = metrics_row(80_002)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(last[:-5])  # torn again, then completed with the rest of the file
    _catch_up(reader)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(last[-5:] + metrics_text(ROWS - 80_002, first=80_003))
    _catch_up(reader)

    whole = parse_metrics_csv(path.read_text(encoding="utf-8"))
    assert len(whole) == ROWS
    assert reader.rows == whole
    assert [r["epoch"] for r in reader.rows[59_999:60_002]] == [60_000.0, 60_001.0, 60_002.0]
    assert reader.sample is not None
    assert reader.sample.series() == plot_sample(whole)  # however the rows arrived


def test_the_plot_sample_is_bounded_and_keeps_the_ends_and_the_extremes() -> None:
    rows = parse_metrics_csv(HEADER + metrics_text(ROWS))
    series = plot_sample(rows)
    assert set(series) >= {"train_loss", "val_loss", "val_acc", "throughput_samples_per_sec"}
    for column, (xs, ys) in series.items():
        assert len(xs) == len(ys) <= MOST_POINTS, column
        assert xs[0] == 1.0 and xs[-1] == float(ROWS), column  # first and last epoch
        assert list(xs) == sorted(xs), column  # in the file's order
    xs, ys = series["train_loss"]
    assert ys[xs.index(float(SPIKE_EPOCH))] == SPIKE_LOSS  # one epoch's spike stays
    assert min(ys) == min(r["train_loss"] or 0 for r in rows)  # so does the lowest loss


def test_a_short_run_is_plotted_point_for_point() -> None:
    rows = parse_metrics_csv(HEADER + metrics_text(PLOT_BUCKETS))
    xs, ys = plot_sample(rows)["val_loss"]
    assert xs == tuple(float(e) for e in range(1, PLOT_BUCKETS + 1))
    assert ys == tuple(r["val_loss"] for r in rows)


def test_a_plot_sample_skips_rows_without_an_epoch_or_a_finite_value() -> None:
    sample = PlotSample(("train_loss",), buckets=4)
    sample.add_all(
        [
            {"epoch": 1.0, "train_loss": 1.0},
            {"epoch": None, "train_loss": 9.0},
            {"epoch": 3.0, "train_loss": float("inf")},
            {"epoch": float("nan"), "train_loss": 7.0},
            {"epoch": 5.0, "train_loss": 0.5},
        ]
    )
    assert sample.series() == {"train_loss": ((1.0, 5.0), (1.0, 0.5))}


def test_following_a_100000_row_run_hands_the_screen_its_newest_rows_and_a_sample(
    tmp_path: Path,
) -> None:
    run_id = finished_run(tmp_path / "runs", "long", ROWS)
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    cluster = Cluster.open(profile, local_state_dir=str(tmp_path / "state"))
    try:
        cluster.refresh()
        detail = cluster.follow(run_id)
        assert detail.metrics_total == ROWS  # the 8 MB at the first follow, not 4 MiB a follow
        assert len(detail.metrics) == DETAIL_METRICS_ROWS
        assert [r["epoch"] for r in detail.metrics[:1] + detail.metrics[-1:]] == [
            float(ROWS - DETAIL_METRICS_ROWS + 1),
            float(ROWS),
        ]
        assert all(len(xs) <= MOST_POINTS for xs, _ in detail.metrics_plot.values())
        assert detail.metrics_plot["train_loss"][0][-1] == float(ROWS)
        again = cluster.follow(run_id)  # nothing new: the same newest rows, the same sample
        assert (again.metrics_total, again.metrics, again.metrics_plot) == (
            ROWS,
            detail.metrics,
            detail.metrics_plot,
        )
    finally:
        cluster.close()


class _CountingExecutor(LocalExecutor):
    """The real local executor, counting the batches that read ``metrics.csv`` and the bytes
    they read of it."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics_bytes = 0
        self.batches = 0  # of those that read a metrics.csv

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        result = super().run_batch(batch, timeout=timeout)
        metrics = [r for r in result.reads if r.request.path.endswith("/metrics.csv")]
        self.batches += bool(metrics)
        self.metrics_bytes += sum(len(r.data) for r in metrics)
        return result


def test_compare_reads_each_runs_metrics_once_then_only_the_new_rows(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    long_id = finished_run(root, "long", ROWS, group="sweep")
    finished_run(root, "short", 100, group="sweep")
    executor = _CountingExecutor()
    store = RunStore(executor, str(root))
    cache = MetricsCache(executor)
    runs = {r.run_id: len(r.metrics) for r in load_group(store, "sweep", metrics=cache)}
    assert sorted(runs.values()) == [100, ROWS]
    whole = executor.metrics_bytes
    assert whole == sum((root / i / "metrics.csv").stat().st_size for i in runs)

    new = metrics_text(5, first=ROWS + 1)
    with open(root / long_id / "metrics.csv", "a", encoding="utf-8") as fh:
        fh.write(new)
    again = {r.run_id: len(r.metrics) for r in load_group(store, "sweep", metrics=cache)}
    assert again[long_id] == ROWS + 5
    assert executor.metrics_bytes - whole == len(new)  # the appended rows, nothing else


def test_compare_of_a_run_whose_metrics_csv_is_a_directory_reads_it_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_id = finished_run(root, "damaged", 10, group="sweep")
    (root / run_id / "metrics.csv").unlink()
    (root / run_id / "metrics.csv").mkdir()
    executor = _CountingExecutor()
    runs = load_group(RunStore(executor, str(root)), "sweep", metrics=MetricsCache(executor))
    assert [len(r.metrics) for r in runs] == [0]
    assert executor.batches == 1  # not one catch-up round after another


def test_the_jobs_table_counts_every_epoch_of_an_ended_100000_row_run(tmp_path: Path) -> None:
    run_id = finished_run(tmp_path / "runs", "long", ROWS)
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    cluster = Cluster.open(profile, local_state_dir=str(tmp_path / "state"))
    try:
        done = []
        for _ in range(6):  # 4 MiB a refresh: the 8 MB file takes two or three
            view = next(v for v in cluster.refresh().runs if v.run_id == run_id)
            done.append(view.epochs_done)
        # Before, an ended run's files were read once more after its end, 4 MiB at most:
        # the table stopped at 46,005 epochs for good.
        assert done[-1] == ROWS, done
    finally:
        cluster.close()
