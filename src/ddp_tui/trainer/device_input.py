"""From a host batch to the model's input on the device: the copy, the decode (GPU JPEG
decode), the conversion and normalisation, and a prefetcher that overlaps them with compute.

Image batches cross the host as uint8: a quarter of float32's bytes in the workers' shared
memory, the pinned copy and the PCIe transfer. They become floats only on the device, in the
training precision and memory format, with the same arithmetic as torchvision's ``ToTensor`` +
``Normalize`` (``x / 255``, minus the mean, over the std), so that a float32 run gets the very
values the float pipeline gave.

On a GPU the :class:`Prefetcher` keeps the next batch one step ahead on a side stream: its copy
(pinned memory, ``non_blocking``), decode and normalisation run while the current step computes.
On the CPU there is nothing to overlap and it passes each batch through. Either way it times the
host-to-device copy and the device-side preparation apart (docs/step-breakdown.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .gpu_decode import DeviceDecoder
from .timing import Stamp, seconds, stamp


@dataclass(frozen=True)
class Normalization:
    """How a uint8 sample becomes the model's input: ``(x / 255 - mean) / std`` per channel
    (one value: every element)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def as_dict(self) -> dict[str, list[float]]:
        return {"mean": list(self.mean), "std": list(self.std)}


def normalize(
    x: torch.Tensor,
    norm: Normalization,
    dtype: torch.dtype = torch.float32,
    channels_last: bool = False,
) -> torch.Tensor:
    """A uint8 sample or batch (``C,H,W`` / ``N,C,H,W`` or flat) as the model's input.

    The operations are ``ToTensor``'s and ``Normalize``'s, in their order and in float32, then
    the cast to ``dtype`` (what autocast would cast the first layer's input to anyway)."""
    out = x.to(torch.float32).div_(255)
    mean = torch.as_tensor(norm.mean, dtype=torch.float32, device=out.device)
    std = torch.as_tensor(norm.std, dtype=torch.float32, device=out.device)
    if mean.numel() > 1:  # per channel: C is the third dimension from the end
        mean, std = mean.view(-1, 1, 1), std.view(-1, 1, 1)
    out.sub_(mean).div_(std)
    if channels_last and out.dim() == 4:
        return out.to(dtype, memory_format=torch.channels_last)
    return out.to(dtype)


class DeviceInput:
    """One batch from the loader to the device: :meth:`copy` moves it (uint8 stays uint8),
    :meth:`finish` decodes (GPU decode) and converts it; on the current stream."""

    def __init__(
        self,
        device: torch.device,
        norm: Normalization | None,
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
        decoder: DeviceDecoder | None = None,
    ) -> None:
        self.device = device
        self.norm = norm
        self.dtype = dtype
        self.channels_last = channels_last
        self.decoder = decoder

    def copy(self, batch: Any) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """``(input, target, flips)`` with the target on the device; the input too, unless the
        decoder takes it as it is (JPEG bytes stay on the host: nvjpeg reads them there)."""
        if self.decoder is not None:
            items, y, flips = batch
            return items, y.to(self.device, non_blocking=True), flips
        x, y = batch
        if self.norm is None and self.channels_last and x.dim() == 4:
            # Float input (a user's dataset, tabular): moved as before these changes.
            x = x.to(self.device, non_blocking=True, memory_format=torch.channels_last)
        else:
            x = x.to(self.device, non_blocking=True)
        return x, y.to(self.device, non_blocking=True), None

    def finish(self, x: Any, flips: torch.Tensor | None) -> torch.Tensor:
        """The model's input: decoded (GPU decode), converted and normalised."""
        if self.decoder is not None:
            x = self.decoder(x, flips)
        if self.norm is None or x.dtype != torch.uint8:
            return x  # type: ignore[no-any-return]
        return normalize(x, self.norm, self.dtype, self.channels_last)

    def __call__(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x, y, flips = self.copy(batch)
        return self.finish(x, flips), y

    def batches(self, source: Iterable[Any], timed: bool = False) -> Prefetcher:
        """``source``'s batches ready on the device, one ahead on a GPU."""
        return Prefetcher(source, self, timed)


class Prefetcher:
    """Iterates a loader's batches as the model's inputs on the device.

    On a GPU each batch is copied, decoded and normalised on a side stream one step ahead: the
    next batch's copy runs during the current step's compute. The current stream waits for that
    stream (on the device, not the host) before it uses the batch, and the batch's memory is
    recorded on it, so the caching allocator does not hand it out while still in use. With
    ``timed``, each copy and each preparation is bracketed by stamps (CUDA events on a GPU, read
    only when :meth:`transfer_sec` or :meth:`prepare_sec` is asked: no per-step sync).
    """

    def __init__(self, source: Iterable[Any], prepare: DeviceInput, timed: bool = False) -> None:
        self._source: Iterator[Any] = iter(source)
        self._prepare = prepare
        self._timed = timed
        self._cuda = prepare.device.type == "cuda"
        self._copies: list[tuple[Stamp, Stamp]] = []
        self._preps: list[tuple[Stamp, Stamp]] = []
        self._stream: Any = None
        self._ahead: tuple[torch.Tensor, torch.Tensor] | None = None
        self._started = False
        self._done = False
        if self._cuda:
            self._stream = torch.cuda.Stream(prepare.device)  # type: ignore[no-untyped-call]

    def __iter__(self) -> Prefetcher:
        return self

    def _stamp(self) -> Stamp:
        return stamp(self._cuda)

    def _load(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The next batch through copy and preparation on the current stream; None at the end."""
        try:
            batch = next(self._source)
        except StopIteration:
            self._done = True
            return None
        t0 = self._stamp() if self._timed else None
        x, y, flips = self._prepare.copy(batch)
        t1 = self._stamp() if self._timed else None
        x = self._prepare.finish(x, flips)
        if t0 is not None and t1 is not None:
            self._copies.append((t0, t1))
            self._preps.append((t1, self._stamp()))
        return x, y

    def _fetch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        with torch.cuda.stream(self._stream):
            return self._load()

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self._cuda:
            ready = self._load()
            if ready is None:
                raise StopIteration
            return ready
        if not self._started:  # the first call fetches two: the batch, and the one ahead
            self._started = True
            # What the current stream made before (DeviceBatches' tables, say) is ready
            # before the side stream reads it.
            self._stream.wait_stream(torch.cuda.current_stream(self._prepare.device))
            self._ahead = self._fetch()
        ready = self._ahead
        if ready is None:
            raise StopIteration
        current = torch.cuda.current_stream(self._prepare.device)
        current.wait_stream(self._stream)
        for t in ready:
            t.record_stream(current)
        # The next batch's copy is queued now, before this batch's compute: it overlaps it.
        self._ahead = None if self._done else self._fetch()
        return ready

    def transfer_sec(self) -> float:
        """Seconds of host-to-device copies so far (waits for the last one on a GPU)."""
        return sum(seconds(self._copies))

    def prepare_sec(self) -> float:
        """Seconds of device-side decode and normalisation so far."""
        return sum(seconds(self._preps))


def input_dtype(precision: str) -> torch.dtype:
    """The dtype image inputs are made in: the autocast dtype of ``precision``, else float32."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
