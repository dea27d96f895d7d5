"""Models by name: the built-ins, any torchvision classification model, or ``pkg.mod:fn``.

torchvision is imported only when a torchvision model is asked for: it costs seconds to import.
"""

from __future__ import annotations

import copy
import difflib
import math
from typing import Any

import torch
from torch import nn

from ddp_tui.jobfiles import BUILTIN_MODELS

from .errors import UsageError
from .user_code import call_with_known_kwargs, load_callable


class MLP(nn.Module):
    """A two-hidden-layer perceptron over the flattened input."""

    def __init__(self, in_features: int, num_outputs: int, hidden: tuple[int, int] = (256, 128)):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_features, hidden[0]),
            nn.ReLU(inplace=True),
            nn.Linear(hidden[0], hidden[1]),
            nn.ReLU(inplace=True),
            nn.Linear(hidden[1], num_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


class SimpleCNN(nn.Module):
    """An MNIST-style convolutional net that also takes other image sizes and channel counts."""

    def __init__(self, in_channels: int, num_outputs: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * 16, 128),
            nn.ReLU(inplace=True),
            nn.Dropout(0.25),
            nn.Linear(128, num_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))  # type: ignore[no-any-return]


class GrayToRGB(nn.Module):
    """Repeat a single channel three times, so ImageNet models take MNIST-style input."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x.expand(-1, 3, -1, -1))  # type: ignore[no-any-return]


def torchvision_models() -> list[str]:
    """Names of torchvision's classification models."""
    import torchvision

    return list(torchvision.models.list_models(module=torchvision.models))


def check_model_name(name: str) -> None:
    """Raise a :class:`UsageError` for --model unless the name can be built."""
    if name in BUILTIN_MODELS or ":" in name:
        return
    known = torchvision_models()
    if name not in known:
        close = difflib.get_close_matches(name, [*BUILTIN_MODELS, *known], n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UsageError(
            "--model",
            f"unknown model {name!r}: use mlp, simple_cnn, a torchvision classification model "
            f"(resnet18, resnet50, vit_b_16, ...) or package.module:function.{hint}",
        )


def build_model(name: str, input_shape: tuple[int, ...], num_outputs: int) -> nn.Module:
    """Build ``name`` for inputs of ``input_shape`` (one sample) and ``num_outputs`` logits."""
    if name == "mlp":
        return MLP(math.prod(input_shape), num_outputs)
    image = len(input_shape) == 3
    if name == "simple_cnn":
        if not image:
            raise UsageError(
                "--model", f"simple_cnn needs image input (C,H,W); the data has shape {input_shape}"
            )
        return SimpleCNN(input_shape[0], num_outputs)
    if ":" in name:
        model = call_with_known_kwargs(
            load_callable(name, "--model"),
            num_classes=num_outputs,
            input_shape=input_shape,
            in_channels=input_shape[0] if image else None,
        )
        if not isinstance(model, nn.Module):
            raise UsageError(
                "--model", f"{name} returned {type(model).__name__}, not a torch Module"
            )
        return model
    check_model_name(name)
    if not image or input_shape[0] not in (1, 3):
        raise UsageError(
            "--model",
            f"{name} needs image input with 1 or 3 channels; the data has shape {input_shape}",
        )
    import torchvision

    kwargs: dict[str, Any] = {"weights": None, "num_classes": num_outputs}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    if name.startswith("vit_"):
        kwargs["image_size"] = input_shape[1]
    model = torchvision.models.get_model(name, **kwargs)
    return GrayToRGB(model) if input_shape[0] == 1 else model


def has_conv(model: nn.Module) -> bool:
    """True when the model has 2-D convolutions (channels_last then pays off on GPUs)."""
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def training_flops_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> float | None:
    """FLOPs of one training sample (forward + backward), counted on the meta device.

    Returns None where the count fails (exotic layers); MFU is then left empty.
    """
    from torch.utils.flop_counter import FlopCounterMode

    batch = 2  # BatchNorm needs more than one value per channel in training mode
    try:
        with torch.random.fork_rng(devices=[]):
            meta = copy.deepcopy(model).to("meta")
            meta.train()
            x = torch.empty((batch, *input_shape), device="meta")
            counter = FlopCounterMode(display=False)
            with counter:
                out = meta(x)
                out.float().sum().backward()
        total = float(counter.get_total_flops())
    except Exception:  # exotic layers: a best-effort estimate, MFU is then left empty
        return None
    return total / batch if total > 0 else None
