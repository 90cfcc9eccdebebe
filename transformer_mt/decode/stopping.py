"""Stopping a decoding between two steps, when nobody waits for its result any more (the
server's request timed out, or its client left)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from torch import nn

from transformer_mt.model.transformer import Decoder


class StoppedError(Exception):
    """Decoding stopped at a step: its ``stop`` said nobody waits for the result any more."""


@contextlib.contextmanager
def stopping(model: nn.Module, stop: Callable[[], bool] | None) -> Iterator[None]:
    """While the block runs, each decoder step of ``model`` (of each member of an ensemble)
    first asks ``stop``, and a yes raises :class:`StoppedError`: a hook on the decoder's embedding,
    which every eager step calls once (from outside the model, as ``inside/lens.py``'s switches).
    ``--compile``'s graphs do not call it: they are asked nothing."""
    if stop is None:
        yield
        return

    def check(module: nn.Module, args: Any) -> None:
        if stop():
            raise StoppedError

    hooks = [m.embed.register_forward_pre_hook(check) for m in model.modules()
             if isinstance(m, Decoder)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
