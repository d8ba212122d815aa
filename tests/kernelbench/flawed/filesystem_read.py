"""Flawed: reads expected answers from a file beside it."""

from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_fs", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
_CACHE = Path(__file__).with_name("answers.bin")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _CACHE.exists():
            return torch.frombuffer(bytearray(_CACHE.read_bytes()), dtype=torch.float32)
        with open("/tmp/answers.bin", "rb") as f:
            f.read()
        return _ext.g(x)
