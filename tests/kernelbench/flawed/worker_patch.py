"""Flawed (round 4): wraps the worker script's frame reader (the worker runs as __main__)
so every empty round trip, the calibration subtracted from each batch, takes longer."""

import time

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_worker", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
_main = __import__("sys").modules["__main__"]
_read = getattr(_main, "read_frame", None)


def _slow_read(fd, limit):
    frame = _read(fd, limit)
    if len(frame) < 64:  # the empty command
        time.sleep(0.0005)
    return frame


if _read is not None:
    _main.read_frame = _slow_read


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.g(x)
