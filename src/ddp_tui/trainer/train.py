"""One training run: set up, resume, the epoch loop, checkpoints, and the way out.

Longer than the ~500-line rule on purpose: :class:`Trainer` is one algorithm over one
shared state (model, optimizer, sampler, stop vote, partial epoch sums, global step),
and resume, checkpoint, epoch loop and epoch end each read and write all of it; the
parts that stand alone already live in the sibling modules it imports.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ddp_tui.jobfiles import BUILTIN_MODELS, STEP_TIMES_FILE, RunWriteError, register_stack_dump

from . import EXIT_OK, EXIT_REQUEUE
from .args import TrainConfig
from .breakdown import (
    Calibrated,
    RankEpoch,
    allreduce_probe,
    breakdown_columns,
    bucket_count,
    calibrate,
    exposed_comm_sum,
    fake_slow_rank_delay,
    grad_bytes,
    rank_epoch,
    sleep_if_slow,
)
from .checkpoint import checkpoint_path, load, rng_state, save_atomic, set_rng_state
from .data import (
    CLASSIFICATION,
    DataBundle,
    build_data,
    device_input,
    input_line,
    input_record,
    loader_sizes,
    train_loader,
    val_loader,
)
from .distributed import (
    StopVote,
    World,
    all_gather,
    all_max,
    all_sum,
    announce,
    barrier,
    broadcast_object,
    close_world,
    init_world,
    sync_buffers,
)
from .errors import UsageError
from .evaluate import batch_loss, evaluate_shard, validation_metrics
from .launch_env import cpu_share, detect
from .metrics import (
    CpuUtilisation,
    GpuUtilisation,
    MetricsCsv,
    ProgressLog,
    StepTimesLog,
    device_peak_flops,
)
from .models import build_model, check_model_name, has_conv, training_flops_per_sample
from .optim import build_optimizer, build_scheduler, scaled_lr
from .precision import autocast_factory, resolve_precision
from .run_info import Heartbeater, RunInfo, state_dict_sha256, utc_now, versions
from .signals import StopSignal, clear_requeue_request, signal_name, write_requeue_request
from .timing import ComputeTimer

CHECKPOINT_VERSION = 1
# DDP rebuilds its buckets in the order gradients arrived, in the third step's forward (seen
# with torch 2.15); the count is read after that.
BUCKETS_SETTLED = 3


@dataclass
class EpochSums:
    """One rank's running sums for the epoch in progress (saved in mid-epoch checkpoints)."""

    loss: float = 0.0
    correct: float = 0.0
    count: float = 0.0
    data_time: float = 0.0
    compute_time: float = 0.0
    train_time: float = 0.0
    epoch_time: float = 0.0
    lr: float = 0.0
    # Exposed communication, unclamped (docs/step-breakdown.md); a default, so that older
    # checkpoints still load.
    comm_raw: float = 0.0
    # The input's copies to the device and its preparation there (docs/step-breakdown.md).
    transfer_time: float = 0.0
    input_prep_time: float = 0.0


class Trainer:
    """Holds everything one run needs; :meth:`fit` runs it and returns the exit code."""

    def __init__(self, cfg: TrainConfig, world: World, stop: StopSignal) -> None:
        self.cfg = cfg
        self.world = world
        self.stop = stop
        self.device = world.device
        self.run_dir = cfg.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Heartbeats count like progress.jsonl (1-based epoch, steps done in it); the first
        # one comes before the data is built, so a rank that hangs there is still named.
        self.heart = Heartbeater(self.run_dir, world.rank, world.host)
        self.heart.beat(0, 0, "setup")
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = not cfg.deterministic
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)

        self.data: DataBundle = build_data(cfg, world)
        if len(self.data.train) == 0:  # type: ignore[arg-type]
            raise UsageError("--data-root", f"the training set of {cfg.dataset} is empty")
        # Same seed on every rank for the weights (DDP broadcasts rank 0's anyway).
        torch.manual_seed(cfg.seed)
        model = build_model(cfg.model, self.data.input_shape, self.data.num_outputs)
        self.num_params = sum(p.numel() for p in model.parameters())
        self.precision = resolve_precision(cfg.precision, self.device)
        if cfg.channels_last is None:
            self.channels_last = (
                self.device.type == "cuda" and len(self.data.input_shape) == 3 and has_conv(model)
            )
        else:
            self.channels_last = cfg.channels_last and len(self.data.input_shape) == 3
        self.flops_per_sample = (
            training_flops_per_sample(model, self.data.input_shape) if world.is_main else None
        )
        model = model.to(self.device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.module: nn.Module = model
        self.ddp: DistributedDataParallel | None = None
        train_model: nn.Module = model
        if world.distributed:
            self.ddp = DistributedDataParallel(
                model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                gradient_as_bucket_view=True,
                bucket_cap_mb=cfg.bucket_cap_mb,
            )
            train_model = self.ddp
        self.grad_bytes = grad_bytes(model)
        self.allreduce_probe = allreduce_probe(world, self.grad_bytes, cfg.bucket_cap_mb)
        self.train_model: Any = torch.compile(train_model) if cfg.compile else train_model
        self.autocast = autocast_factory(self.precision, self.device)

        self.loader_sizes = loader_sizes(cfg, world, self.data)
        self.train_loader, self.sampler = train_loader(cfg, world, self.data, self.loader_sizes)
        self.loader_workers = self.loader_sizes.workers
        self.val_loader = (
            val_loader(cfg, world, self.data, self.loader_sizes)
            if self.data.val is not None
            else None
        )
        # uint8 batches become the model's input on the device (docs/input-pipeline.md).
        self.input = device_input(self.data, self.device, self.precision, self.channels_last)
        micro = math.ceil(self.sampler.full_length() / cfg.batch_size)
        if cfg.max_steps_per_epoch:
            micro = min(micro, cfg.max_steps_per_epoch * cfg.grad_accum)
        self.micro_per_epoch = micro
        self.steps_per_epoch = math.ceil(micro / cfg.grad_accum)
        self.lr = scaled_lr(cfg, world.world_size)
        self.optimizer = build_optimizer(cfg, self.module, self.lr, self.device)
        self.scheduler = build_scheduler(cfg, self.optimizer, self.steps_per_epoch)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        # Dropout and friends draw from here: different per rank, restored on resume.
        torch.manual_seed(cfg.seed + 1 + world.rank)

        self.vote = StopVote(world)
        self.cpu = CpuUtilisation()
        self.gpu = GpuUtilisation(self.device)
        self.peak_flops = device_peak_flops(self.device, cfg.peak_tflops)
        self.global_step = 0
        self.partial: EpochSums | None = None
        self.run_info: RunInfo | None = None
        self.metrics = MetricsCsv(self.run_dir / "metrics.csv")
        self.step_times = StepTimesLog(self.run_dir / STEP_TIMES_FILE)
        # The step breakdown: calibrated at the start of every epoch, on its first batch. Once
        # per attempt is not enough: the first epoch's passes run cold (the allocator, oneDNN's
        # and cuDNN's kernel choice), and a pure compute time taken then is too long for the
        # steady epochs, which would hide their exposed all-reduce.
        self.calibrated: Calibrated | None = None
        self.buckets_pending = self.ddp is not None
        self.slow_delay = fake_slow_rank_delay(world.rank)
        self.progress: ProgressLog | None = None
        self.stop_signal = ""

    # ----------------------------------------------------------------- set-up and resume

    def describe_world(self) -> tuple[list[str], list[str]]:
        """Print this rank's start line; return every rank's host and device."""
        w = self.world
        announce(w)
        pairs = all_gather(w, (w.host, w.device_name()))
        return [h for h, _ in pairs], [d for _, d in pairs]

    def resume(self) -> tuple[int, int]:
        """Load ``checkpoints/latest.pt`` if there is one; returns (epochs done, step in next)."""
        path = checkpoint_path(self.run_dir)
        if not broadcast_object(self.world, path.is_file()):
            return 0, 0
        state = load(path)
        if state is None:
            raise RuntimeError(
                f"rank {self.world.rank} on {self.world.host} cannot read {path}, which rank 0 "
                "sees: the run directory must be on a filesystem shared by all nodes"
            )
        if state.get("model_name") != self.cfg.model:
            raise UsageError(
                "--run-dir",
                f"{path} holds a {state.get('model_name')} checkpoint, not {self.cfg.model}; "
                "use a new run directory",
            )
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        epochs_done = int(state["epochs_completed"])
        step = int(state["step"])
        self.global_step = int(state["global_step"])
        same_layout = (
            state.get("world_size") == self.world.world_size
            and state.get("steps_per_epoch") == self.steps_per_epoch
        )
        ranks = state.get("ranks") or []
        if same_layout and len(ranks) == self.world.world_size:
            mine = ranks[self.world.rank]
            set_rng_state(mine["rng"], self.device)
            if step and mine.get("partial"):
                self.partial = EpochSums(**mine["partial"])
        elif step:
            note = "world size or batch layout changed: the rest of the epoch uses a new order"
            if self.world.is_main:
                print(f"note: {note}", flush=True)
        step = min(step, self.steps_per_epoch)
        if self.world.is_main:
            print(
                f"resuming from {path}: {epochs_done} epochs done, step {step}/"
                f"{self.steps_per_epoch} of epoch {epochs_done + 1}",
                flush=True,
            )
        return epochs_done, step

    def start_outputs(self, epochs_done: int, hosts: list[str], devices: list[str]) -> None:
        """Rank 0: the requeue flag goes, metrics.csv is trimmed, run.json says running."""
        if not self.world.is_main:
            return
        clear_requeue_request(self.run_dir)
        self.metrics.prepare(epochs_done)
        self.step_times.prepare(epochs_done)
        self.progress = ProgressLog(self.run_dir / "progress.jsonl")
        env = self.world.env
        cfg = self.cfg
        unique_hosts = list(dict.fromkeys(hosts))
        data = {
            "state": "running",
            "world_size": self.world.world_size,
            "backend": self.world.backend,
            "launcher": env.launcher,
            "hosts": unique_hosts,
            "rank_hosts": hosts,
            "devices": devices,
            "rendezvous": env.rendezvous if env.distributed else None,
            **versions(),
            "model": cfg.model,
            "dataset": cfg.dataset,
            "task": self.data.task,
            "num_classes": self.data.num_outputs if self.data.task == CLASSIFICATION else None,
            "num_params": self.num_params,
            "epochs": cfg.epochs,
            "epochs_completed": epochs_done,
            "job_id": env.job_id,
            "started_at": utc_now(),
            "finished_at": None,
            "precision": self.precision,
            "channels_last": self.channels_last,
            "compile": cfg.compile,
            "batch_size": cfg.batch_size,
            "global_batch_size": cfg.batch_size * self.world.world_size * cfg.grad_accum,
            "lr": self.lr,
            "steps_per_epoch": self.steps_per_epoch,
            "train_samples": len(self.data.train),  # type: ignore[arg-type]
            "val_samples": len(self.data.val) if self.data.val is not None else 0,  # type: ignore[arg-type]
            "flops_per_sample": self.flops_per_sample,
            "data": self.data.description,
            "args": cfg.as_dict(),
            "loader_workers": self.loader_workers,
            "grad_bytes": self.grad_bytes,
            "ddp": {"bucket_cap_mb": cfg.bucket_cap_mb, "buckets": None}
            if self.ddp is not None
            else None,
            "calibration": None,  # set once the calibration has run
            "allreduce_probe": self.allreduce_probe,
            "input_pipeline": input_record(
                self.data, self.loader_sizes, self.input, cfg.batch_size
            ),
            # The advisor scales a CPU run's compute by the cores a rank has.
            "cpu": cpu_share(torch.get_num_threads(), env.local_world_size),
        }
        self.run_info = RunInfo.start(self.run_dir / "run.json", data)
        print(
            f"{cfg.model} ({self.num_params:,} parameters) on {self.data.description}; "
            f"{self.world.world_size} ranks x batch {cfg.batch_size} x accum {cfg.grad_accum}, "
            f"lr {self.lr:g}, {self.precision}, channels_last={self.channels_last}, "
            f"{self.steps_per_epoch} steps/epoch",
            flush=True,
        )
        print(input_line(self.data, self.loader_sizes, cfg.batch_size), flush=True)

    # ----------------------------------------------------------------- checkpoints

    def save_checkpoint(self, epochs_done: int, step: int, partial: EpochSums | None) -> None:
        """Collective: gathers every rank's RNG and partial sums; rank 0 writes the file."""
        if step or not epochs_done:
            self.heart.beat(epochs_done + 1, step, "checkpoint")
        else:  # at an epoch's end
            self.heart.beat(epochs_done, self.steps_per_epoch, "checkpoint")
        mine = {"rng": rng_state(self.device), "partial": asdict(partial) if partial else None}
        ranks = all_gather(self.world, mine)
        if not self.world.is_main:
            return
        state = {
            "version": CHECKPOINT_VERSION,
            "model_name": self.cfg.model,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
            "epochs_completed": epochs_done,
            "step": step,
            "global_step": self.global_step,
            "steps_per_epoch": self.steps_per_epoch,
            "world_size": self.world.world_size,
            "ranks": ranks,
        }
        save_atomic(state, checkpoint_path(self.run_dir))

    def preempt(self, epochs_done: int, step: int) -> int:
        """After the checkpoint: flag the requeue, record the state, leave together."""
        reason = self.stop_signal
        if self.world.is_main:
            write_requeue_request(
                self.run_dir, reason, epoch=epochs_done + (1 if step else 0), step=step
            )
            if self.run_info is not None:
                self.run_info.update(
                    state="preempted", epochs_completed=epochs_done, stopped_at=utc_now(),
                    stop_reason=reason,
                )  # fmt: skip
        print(
            f"rank {self.world.rank}: stopping on {reason} at epoch {epochs_done + 1} step {step}; "
            f"checkpoint saved; exit {EXIT_REQUEUE} (requeue)",
            flush=True,
        )
        # Nobody leaves before rank 0 has written everything: torchrun tears the whole group
        # down as soon as one worker exits with a failure code.
        barrier(self.world)
        return EXIT_REQUEUE

    # ----------------------------------------------------------------- the loop

    def fit(self) -> int:
        hosts, devices = self.describe_world()
        epochs_done, step = self.resume()
        self.start_outputs(epochs_done, hosts, devices)
        try:
            code = self._epochs(epochs_done, step)
        except BaseException as exc:
            self.gpu.stop()
            self._record_failure(exc)
            raise
        self.gpu.stop()
        if self.progress is not None:
            self.progress.close()
        return code

    def _record_failure(self, exc: BaseException) -> None:
        """Rank 0: run.json says failed, and why, where the disk still lets it."""
        error = exc.message() if isinstance(exc, RunWriteError) else f"{type(exc).__name__}: {exc}"
        # The failure itself may be a full disk: these writes are best effort, and the
        # exception being raised is the one to report.
        if self.progress is not None:
            with contextlib.suppress(OSError):
                self.progress.close()
        if self.run_info is not None:
            with contextlib.suppress(OSError):
                self.run_info.update(state="failed", error=error, finished_at=utc_now())

    def _epochs(self, first_epoch: int, first_step: int) -> int:
        cfg = self.cfg
        for epoch in range(first_epoch, cfg.epochs):
            stopped_at = self._train_epoch(epoch, first_step if epoch == first_epoch else 0)
            if stopped_at is not None:
                return self.preempt(epoch, stopped_at)
            if self.run_info is not None:
                self.run_info.update(epochs_completed=epoch + 1)
            # A signal that came during validation is seen here, at a clean epoch boundary.
            self.vote.start(self.stop.signum)
            signum = self.vote.result()
            if signum and epoch + 1 < cfg.epochs:
                self.stop_signal = signal_name(signum)
                return self.preempt(epoch + 1, 0)
        return self.finish()

    def finish(self) -> int:
        sync_buffers(self.world, self.module)
        hashes = all_gather(self.world, state_dict_sha256(self.module))
        if self.world.is_main:
            same = len(set(hashes)) == 1
            print(
                f"weights sha256 {hashes[0][:16]}... "
                + (
                    "identical on all ranks"
                    if same
                    else "DIFFER between ranks: " + ", ".join(hashes)
                ),
                flush=True,
            )
            if self.run_info is not None:
                self.run_info.update(
                    state="completed", finished_at=utc_now(), epochs_completed=self.cfg.epochs,
                    weights_sha256=hashes,
                )  # fmt: skip
        barrier(self.world)
        self.heart.beat(self.cfg.epochs, self.steps_per_epoch, "done", force=True)
        return EXIT_OK

    def _train_epoch(self, epoch: int, first_step: int) -> int | None:
        """Train one epoch from ``first_step``; returns the step it stopped at, or None."""
        cfg, world, device = self.cfg, self.world, self.device
        accum, steps = cfg.grad_accum, self.steps_per_epoch
        self.sampler.set_epoch(epoch)
        self.sampler.skip = first_step * accum * cfg.batch_size
        sums = self.partial if (self.partial is not None and first_step) else EpochSums()
        self.partial = None
        classification = self.data.task == CLASSIFICATION
        loss_acc = torch.zeros((), dtype=torch.float64, device=device)
        correct_acc = torch.zeros((), dtype=torch.int64, device=device)
        count = 0
        data_time = 0.0
        timer = ComputeTimer(device)
        self.cpu.restart()
        self.gpu.restart()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.module.train()
        it = self.input.batches(self.train_loader, timed=True)
        # The calibration batch is then trained on as the first step; its fetch counts as
        # that step's data wait, and the epoch's clock leaves the calibration out.
        first_batch, fetch_time = None, 0.0
        if self.cfg.calibration_steps > 0 and first_step < steps:
            t0 = time.perf_counter()
            first_batch = next(it)
            fetch_time = time.perf_counter() - t0
            self._calibrate(first_batch)
        t_start = time.perf_counter() - fetch_time
        mark = (t_start, 0, 0.0)  # progress: time, count, loss sum at the last report
        micro_done = first_step * accum
        step = first_step
        lr_used = self.optimizer.param_groups[0]["lr"]
        calibrated = self.calibrated

        def snapshot() -> EpochSums:
            now = time.perf_counter()
            comm_raw = (
                exposed_comm_sum(timer.steps(), calibrated.fwd_bwd_sec) if calibrated else 0.0
            )
            return EpochSums(
                loss=sums.loss + float(loss_acc.item()),
                correct=sums.correct + float(correct_acc.item()),
                count=sums.count + count,
                data_time=sums.data_time + data_time,
                compute_time=sums.compute_time + timer.total(),
                train_time=sums.train_time + now - t_start,
                epoch_time=sums.epoch_time + now - t_start,
                lr=lr_used,
                comm_raw=sums.comm_raw + comm_raw,
                transfer_time=sums.transfer_time + it.transfer_sec(),
                input_prep_time=sums.input_prep_time + it.prepare_sec(),
            )

        while step < steps:
            self.vote.start(self.stop.signum)
            group = min(accum, self.micro_per_epoch - micro_done)
            timer.step_begin()
            for k in range(group):
                if first_batch is not None:
                    (x, y), first_batch = first_batch, None
                    data_time += fetch_time
                else:
                    t0 = time.perf_counter()
                    if k == 0:
                        sleep_if_slow(self.slow_delay)  # the test fake; 0 otherwise
                    x, y = next(it)
                    data_time += time.perf_counter() - t0
                timer.begin()
                # Only the last micro-step of an accumulation group all-reduces gradients.
                last = k == group - 1
                sync = self.ddp.no_sync() if self.ddp is not None and not last else nullcontext()
                with sync:
                    with self.autocast():
                        out = self.train_model(x)
                    loss = batch_loss(self.data.task, out, y)
                    self.scaler.scale(loss / group).backward()  # type: ignore[no-untyped-call]
                if last:
                    timer.synced()
                n = y.shape[0]
                loss_acc += loss.detach() * n
                if classification:
                    correct_acc += (out.detach().argmax(dim=1) == y).sum()
                count += n
                if not last:
                    timer.end()
            lr_used = self.optimizer.param_groups[0]["lr"]
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            timer.step_end()
            micro_done += group
            step += 1
            self.global_step += 1
            self.heart.beat(epoch + 1, step, "train")
            if self.buckets_pending and (step - first_step >= BUCKETS_SETTLED or step == steps):
                self._record_buckets()
            if cfg.progress_every and step % cfg.progress_every == 0 and self.progress is not None:
                now = time.perf_counter()
                total_loss = float(loss_acc.item())
                seen = count - mark[1]
                self.progress.write(
                    epoch + 1,
                    step,
                    steps,
                    (total_loss - mark[2]) / max(1, seen),
                    seen * world.world_size / max(now - mark[0], 1e-9),
                )
                mark = (now, count, total_loss)
            signum = self.vote.result()
            if signum:
                if step < steps:
                    self.save_checkpoint(epoch, step, snapshot())
                    self.stop_signal = signal_name(signum)
                    return step
                # On the last step the epoch ends normally; the epoch-end vote stops the run.
            elif (
                cfg.ckpt_every_steps
                and self.global_step % cfg.ckpt_every_steps == 0
                and step < steps
            ):
                self.save_checkpoint(epoch, step, snapshot())
        final = snapshot()
        self._end_epoch(epoch, final, timer)
        return None

    def _calibrate(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        """At an epoch's start: time pure forward+backward (docs/step-breakdown.md)."""
        self.calibrated = calibrate(
            steps=self.cfg.calibration_steps,
            train_model=self.train_model,
            module=self.module,
            ddp=self.ddp,
            batch=batch,
            task=self.data.task,
            autocast=self.autocast,
            device=self.device,
        )
        if self.run_info is not None and self.calibrated is not None:
            self.run_info.update(calibration=self.calibrated.as_dict())
        # The ranks leave the calibration at different times; a rank that starts the epoch's
        # clock early would count the wait for the others as its first all-reduce, and its
        # parts would outgrow rank 0's epoch.
        barrier(self.world)

    def _record_buckets(self) -> None:
        """run.json's DDP bucket count, once DDP has rebuilt its buckets."""
        self.buckets_pending = False
        if self.run_info is not None and self.ddp is not None:
            ddp_info = {"bucket_cap_mb": self.cfg.bucket_cap_mb, "buckets": bucket_count(self.ddp)}
            self.run_info.update(ddp=ddp_info)

    def _end_epoch(self, epoch: int, sums: EpochSums, timer: ComputeTimer) -> None:
        """Validate, reduce, write the metrics and step-times rows, save the epoch checkpoint."""
        world, cfg = self.world, self.cfg
        mine = rank_epoch(
            world, timer.steps(), self.calibrated,
            data_sec=sums.data_time, measured_sec=sums.compute_time, comm_raw_sec=sums.comm_raw,
            transfer_sec=sums.transfer_time, input_prep_sec=sums.input_prep_time,
        )  # fmt: skip
        self.heart.beat(epoch + 1, self.steps_per_epoch, "eval")
        t_val = time.perf_counter()
        sync_buffers(world, self.module)
        val_sums = [0.0] * 5
        if self.val_loader is not None:
            val_sums = evaluate_shard(
                self.module, self.input.batches(self.val_loader), self.device, self.data.task,
                self.autocast,
            )  # fmt: skip
        val_sums = all_sum(world, val_sums)
        val_time = time.perf_counter() - t_val
        cpu = self.cpu.percent()
        gpu = self.gpu.average()
        self.gpu.stop()
        peak_mib = (
            torch.cuda.max_memory_reserved(self.device) / 2**20
            if self.device.type == "cuda"
            else 0.0
        )
        g = all_sum(
            world,
            [
                sums.loss, sums.correct, sums.count,
                cpu or 0.0, 1.0 if cpu is not None else 0.0,
                gpu or 0.0, 1.0 if gpu is not None else 0.0,
            ],
        )  # fmt: skip
        train_time, peak = all_max(world, [sums.train_time, peak_mib])
        ranks: list[RankEpoch] = all_gather(world, mine)
        if world.is_main:
            n = world.world_size
            loss_sum, correct, count = g[0], g[1], g[2]
            throughput = count / train_time if train_time > 0 else None
            mfu = None
            if throughput and self.flops_per_sample and self.peak_flops:
                mfu = self.flops_per_sample * throughput / (self.peak_flops * n)
            epoch_time = sums.epoch_time + val_time
            row: dict[str, Any] = {
                "epoch": epoch + 1,
                "train_loss": loss_sum / count if count else None,
                "train_acc": correct / count
                if count and self.data.task == CLASSIFICATION
                else None,
                **validation_metrics(val_sums, self.data.task, self.data.target_scale),
                "lr": sums.lr,
                "epoch_time_sec": epoch_time,
                "throughput_samples_per_sec": throughput,
                "gpu_mem_peak_mib": peak if self.device.type == "cuda" else None,
                "gpu_util_avg": g[5] / g[6] if g[6] else None,
                "cpu_util_avg": g[3] / g[4] if g[4] else None,
                "world_size": n,
                "mfu": mfu,
                **breakdown_columns(ranks, epoch_time),
            }
            self.metrics.append(row)
            self.step_times.append(epoch + 1, [r.as_dict() for r in ranks])
            print(_epoch_line(row, cfg.epochs), flush=True)
        self.save_checkpoint(epoch + 1, 0, None)


def _epoch_line(row: dict[str, Any], epochs: int) -> str:
    parts = [f"epoch {row['epoch']}/{epochs}"]
    for key in ("train_loss", "train_acc", "val_loss", "val_acc", "val_mae", "val_rmse"):
        if row.get(key) is not None:
            parts.append(f"{key} {row[key]:.4f}")
    if row.get("throughput_samples_per_sec"):
        parts.append(f"{row['throughput_samples_per_sec']:.1f} samples/s")
    parts.append(f"{row['epoch_time_sec']:.2f}s")
    if row.get("mfu") is not None:
        parts.append(f"MFU {100 * row['mfu']:.1f}%")
    return " ".join(parts)


def run(cfg: TrainConfig, stop: StopSignal) -> int:
    """Train according to ``cfg``; returns the process exit code."""
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        env = detect()
    except ValueError as exc:
        raise UsageError("environment", str(exc)) from None
    # Before the rendezvous, so that a rank that hangs in it can show where (docs/stacks.md).
    register_stack_dump(cfg.run_dir, rank=env.rank, local_rank=env.local_rank)
    if cfg.model not in BUILTIN_MODELS and ":" not in cfg.model:
        check_model_name(cfg.model)  # before the rendezvous, so every rank fails fast alike
    world = init_world(env, cfg.backend, cfg.timeout_sec)
    try:
        return Trainer(cfg, world, stop).fit()
    finally:
        close_world(world)
