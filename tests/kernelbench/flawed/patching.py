"""Flawed: slows the harness's clock and replaces torch's comparison."""

import time as clock

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_patch", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
_real = clock.perf_counter_ns
clock.perf_counter_ns = lambda: _real() // 100
torch.cuda.synchronize = lambda *a, **k: None
_NAME = "allclose"
setattr(torch, _NAME, lambda *a, **k: True)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.g(x)
