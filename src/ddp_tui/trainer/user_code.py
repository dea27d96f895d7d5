"""Loading a user's own ``package.module:function`` for --model and --dataset."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, cast

from .errors import UsageError


def load_callable(spec: str, argument: str) -> Callable[..., Any]:
    """Import ``package.module:function``; problems become a UsageError for ``argument``."""
    module_name, _, attr = spec.partition(":")
    # `ddp-train` (a console script) does not put the working directory on sys.path; `-m` does.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            argument, f"cannot import {module_name!r} ({exc}); is it on PYTHONPATH?"
        ) from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UsageError(argument, f"{module_name!r} has no function {attr!r}")
    return cast("Callable[..., Any]", fn)


def call_with_known_kwargs(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Call ``fn`` with the subset of ``kwargs`` that its signature accepts."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(**kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn(**kwargs)
    return fn(**{k: v for k, v in kwargs.items() if k in params})
