"""What parsing a user script's stdout costs the wrapper (``python -m ddp_tui.scriptrun``).

A generator child writes rank 0's stdout at ~20 MB/s (log lines of a busy training loop, a few
step lines that name the epoch, a tqdm-like bar redrawn with ``\\r``) with an epoch line
(``Epoch N - Avg Loss: ..., Accuracy: ...%``) every 0.5 s, and a tqdm bar redraw on stderr
every 0.1 s (tqdm's own pace; ``auto`` pipes and parses stderr for bars), for ``--seconds``.
Side by side in the same run, each for the same time:

- ``cat``: the generator piped through ``cat`` (plain copying, the floor);
- ``wrapper, none``: the wrapper with ``--metrics none`` (its copy loop, no parsing);
- ``wrapper, auto``: the wrapper with ``--metrics auto`` (helper lines and every preset).

CPU share = the copier's CPU time (user + system; the wrapper's own, the generator's taken
out) / wall time, of one core. Target: the parsing wrapper <= 10% of one core at 20 MB/s.
Epoch delay = from the generator's write of an epoch line (its own clock) to the row showing
up in metrics.csv (this process polls it every 10 ms). Target: <= 1 s. Parser throughput is the
parser alone, flat out, over the same kind of text in 64 KiB reads.

    python benchmarks/bench_script_metrics.py
    python benchmarks/bench_script_metrics.py --seconds 5 --rate-mb 40
    python benchmarks/bench_script_metrics.py --quick   # 1 s per side, 2 MiB of text; exits 0
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
sys.path.insert(0, str(SRC))

from ddp_tui.scriptrun.stream import StdoutParser  # noqa: E402
from record import Record, add_quick_option  # noqa: E402

# The generator: paced writes of pre-made noise blocks, an epoch line every `interval` s; it
# appends "epoch write_time" to a side file, and its own CPU time at the end.
GENERATOR = r"""
import os, resource, sys, time
noise_path, side_path, seconds, rate, interval = sys.argv[1:6]
seconds, rate, interval = float(seconds), float(rate), float(interval)
noise = open(noise_path, "rb").read().split(b"\n")
block, blocks = [], []
size = 0
for line in noise:
    block.append(line)
    size += len(line) + 1
    if size >= rate / 100:
        blocks.append(b"\n".join(block) + b"\n")
        block, size = [], 0
side = open(side_path, "a")
start = time.monotonic()
next_epoch = start + interval
next_bar = start
epoch, i, sent = 0, 0, 0
while True:
    now = time.monotonic()
    if now - start >= seconds:
        break
    if now >= next_bar:  # no "Epoch" in it and never 100%: progress only, no row
        n = int((now - start) * 10) % 100
        bar = f"\r{n:3d}%|{'#' * (n // 10):10s}| {n}/100 [00:01<00:09, 9.9it/s, loss=0.5]"
        os.write(2, bar.encode())
        next_bar += 0.1
    if now >= next_epoch:
        epoch += 1
        line = f"Epoch {epoch} - Avg Loss: {1.0 / epoch:.4f}, Accuracy: {50 + epoch / 10:.1f}%\n"
        side.write(f"{epoch} {time.time()}\n")
        side.flush()
        os.write(1, line.encode())
        next_epoch += interval
    data = blocks[i % len(blocks)]
    i += 1
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
    sent += len(data)
    ahead = start + sent / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
ru = resource.getrusage(resource.RUSAGE_SELF)
side.write(f"cpu {ru.ru_utime + ru.ru_stime} {sent}\n")
"""


def noise(n_bytes: int, seed: int = 0, special: float = 0.0008) -> bytes:
    """Log lines of a busy loop: no epoch in most; a ``special`` share of step lines that name
    the epoch (at 20 MB/s, 0.0008 is ~100 a second) and an eighth of that of tqdm redraws."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    step = 0
    while size < n_bytes:
        step += 1
        r = rng.random()
        if r < special:
            line = f"epoch {step // 5000} step {step % 5000}/5000 loss {rng.random():.4f}"
        elif r < special * 1.125:
            line = (
                f"\r{step % 100:3d}%|{'#' * (step % 10):10s}| {step % 100}/100 "
                f"[00:0{step % 10}<00:10, {rng.uniform(5, 50):.2f}it/s, loss={rng.random():.3f}]"
            )
        else:
            line = (
                f"[2026-11-24 08:{step // 60 % 60:02d}:{step % 60:02d},{rng.randrange(1000):03d}]"
                f"[train][INFO] step {step}/500000 | loss {rng.random():.4f}"
                f" | lr {rng.random():.2e} | grad_norm {rng.uniform(0, 5):.3f}"
                f" | tok/s {rng.randrange(10**6)} | mem {rng.uniform(1, 80):.1f}G"
            )
        lines.append(line)
        size += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def parser_throughput(text: bytes, chunk: int, source: str = "auto") -> tuple[float, int]:
    """MB/s of StdoutParser.feed over ``text`` in ``chunk``-byte reads; the epochs it found."""
    parser = StdoutParser(source)
    found = 0
    t0 = time.perf_counter()
    for i in range(0, len(text), chunk):
        found += sum(type(r).__name__ == "EpochRecord" for r in parser.feed(text[i : i + chunk]))
    seconds = time.perf_counter() - t0
    return len(text) / seconds / 1e6, found


@dataclass
class Side:
    name: str
    wall: float
    cpu: float  # the copier's own CPU seconds
    mb: float  # MB the generator sent
    delays: list[float]

    @property
    def share(self) -> float:
        return self.cpu / self.wall


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PYTHONPATH=str(SRC), RANK="0", WORLD_SIZE="1", PYTHONUNBUFFERED="1")
    env.pop("TORCHELASTIC_RUN_ID", None)
    return env


def _side_file(path: Path) -> tuple[dict[int, float], float, int]:
    written: dict[int, float] = {}
    cpu, sent = 0.0, 0
    for line in path.read_text().splitlines():
        a, b, *rest = line.split()
        if a == "cpu":
            cpu, sent = float(b), int(rest[0])
        else:
            written[int(a)] = float(b)
    return written, cpu, sent


def _watch(metrics: Path, seen: dict[int, float], stop: threading.Event) -> None:
    """When each row appears in metrics.csv (this process's clock), polled every 10 ms."""
    while not stop.is_set():
        try:
            rows = metrics.read_text().splitlines()[1:]
        except OSError:
            rows = []
        now = time.time()
        for n in range(1, len(rows) + 1):
            seen.setdefault(n, now)
        stop.wait(0.01)


def run_side(name: str, work: Path, cfg: argparse.Namespace, noise_file: Path) -> Side:
    gen = work / "gen.py"
    gen.write_text(GENERATOR)
    side_file = work / f"side-{name.replace(' ', '_').replace(',', '')}.txt"
    gen_argv = [sys.executable, str(gen), str(noise_file), str(side_file),
                str(cfg.seconds), str(cfg.rate_mb * 1e6), str(cfg.interval)]  # fmt: skip
    seen: dict[int, float] = {}
    stop = threading.Event()
    t0 = time.perf_counter()
    if name == "cat":
        with subprocess.Popen(
            gen_argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ) as producer:
            assert producer.stdout is not None
            copier = subprocess.Popen(["cat"], stdin=producer.stdout, stdout=subprocess.DEVNULL)
            producer.stdout.close()
            _, status, usage = os.wait4(copier.pid, 0)
            copier.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        _, _, sent = _side_file(side_file)
        cpu = usage.ru_utime + usage.ru_stime
        return Side(name, wall, cpu, sent / 1e6, [])
    run_dir = work / f"run-{name.split(', ')[1]}"
    watcher = threading.Thread(target=_watch, args=(run_dir / "metrics.csv", seen, stop))
    watcher.start()
    argv = [sys.executable, "-m", "ddp_tui.scriptrun", "--run-dir", str(run_dir),
            "--cwd", str(work), "--metrics", name.split(", ")[1], "--world-size", "1",
            "--", *gen_argv[1:]]  # fmt: skip
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"{name}: the wrapper exited with {proc.returncode}")
    written, gen_cpu, sent = _side_file(side_file)
    # wait4's usage counts the wrapper and the child it reaped: take the generator's out.
    cpu = usage.ru_utime + usage.ru_stime - gen_cpu
    delays = [seen[e] - t for e, t in written.items() if e in seen]
    if name.endswith("auto") and len(delays) != len(written):
        raise SystemExit(f"{name}: {len(written)} epoch lines written, {len(delays)} rows seen")
    return Side(name, wall, cpu, sent / 1e6, delays)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--seconds", type=float, default=None, help="how long each side runs (default 8)"
    )
    p.add_argument("--rate-mb", type=float, default=20.0, help="generator output, MB/s")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between epoch lines")
    add_quick_option(p)
    cfg = p.parse_args(argv)
    # --quick: the same sides at the same rate, for 1 s each (one epoch line), and the parser
    # over 2 MiB of text rather than 32.
    if cfg.seconds is None:
        cfg.seconds = 1.0 if cfg.quick else 8.0
    text_mib, noise_mib = (2, 1) if cfg.quick else (32, 4)
    record = Record("script_metrics", quick=cfg.quick)

    text = noise(text_mib * 2**20)
    dense = noise(text_mib * 2**20, special=0.01)
    user_regex = r"regex:^Epoch (?P<epoch>\d+) - Avg Loss: (?P<train_loss>\S+)"
    print(f"parser alone, flat out, over {len(text) / 1e6:.0f} MB of the generator's kind of text")
    print(f"{'source':38}{'read size':>10}{'MB/s':>8}")
    for label, source, data, chunk in (
        ("auto", "auto", text, 64 * 1024),
        ("auto", "auto", text, 1 << 20),
        ("none (no parsing)", "none", text, 64 * 1024),
        ("auto, 1 line in 90 names the epoch", "auto", dense, 64 * 1024),
        ("regex:^Epoch (?P<epoch>...", user_regex, text, 64 * 1024),
        ("regex:Epoch (?P<epoch>... (no ^)", user_regex.replace("^", ""), text, 64 * 1024),
    ):
        mbs, _ = parser_throughput(data, chunk, source)
        print(f"{label:38}{chunk // 1024:>8}Ki{mbs:>8.0f}")
        record.figure(f"parser alone, {label}, {chunk // 1024} KiB reads", mbs, unit="MB/s")
    print()

    print(
        f"{cfg.rate_mb:g} MB/s for {cfg.seconds:g} s per side, an epoch line every "
        f"{cfg.interval:g} s; stdout and stderr to /dev/null; {os.cpu_count()} CPUs"
    )
    sides: list[Side] = []
    with tempfile.TemporaryDirectory(prefix="bench-script-metrics-") as tmp:
        work = Path(tmp)
        noise_file = work / "noise.txt"
        noise_file.write_bytes(noise(noise_mib * 2**20, seed=1))
        for name in ("cat", "wrapper, none", "wrapper, auto"):
            sides.append(run_side(name, work, cfg, noise_file))
    print(
        f"{'copier':16}{'MB':>8}{'MB/s':>8}{'CPU s':>8}{'CPU share':>11}"
        f"{'epochs':>8}{'delay med s':>13}{'delay max s':>13}"
    )
    for s in sides:
        med = f"{statistics.median(s.delays):.3f}" if s.delays else "-"
        top = f"{max(s.delays):.3f}" if s.delays else "-"
        print(
            f"{s.name:16}{s.mb:>8.0f}{s.mb / s.wall:>8.1f}{s.cpu:>8.2f}{100 * s.share:>10.1f}%"
            f"{len(s.delays) or '-':>8}{med:>13}{top:>13}"
        )
    cat, none, auto = sides
    print()
    print(f"CPU share, wrapper auto / wrapper none: {auto.share / none.share:.2f}x")
    print(f"CPU share, wrapper auto / cat:          {auto.share / cat.share:.2f}x")
    ok_cpu = auto.share <= 0.10
    delay_max = max(auto.delays) if auto.delays else float("nan")
    ok_delay = bool(auto.delays) and delay_max <= 1.0
    print(
        f"wrapper auto: {100 * auto.share:.1f}% of one core (target <= 10%: "
        f"{'met' if ok_cpu else 'NOT met'}); epoch delay max {delay_max:.3f} s "
        f"(target <= 1 s: {'met' if ok_delay else 'NOT met'})"
    )
    record.figure(
        "CPU share, wrapper auto",
        100 * auto.share,
        100 * none.share,
        unit="% of one core",
        note="reference: the wrapper with --metrics none; target <= 10% at 20 MB/s",
    )
    record.figure(
        "CPU share, wrapper none",
        100 * none.share,
        100 * cat.share,
        unit="% of one core",
        note="reference: cat",
    )
    if auto.delays:
        record.figure("epoch delay, median", statistics.median(auto.delays), unit="s")
        record.figure("epoch delay, max", delay_max, unit="s", note="target <= 1 s")
    record.save()
    # A quick run proves the benchmark runs; it asserts nothing about speed.
    return 0 if (ok_cpu and ok_delay) or cfg.quick else 1


if __name__ == "__main__":
    sys.exit(main())
