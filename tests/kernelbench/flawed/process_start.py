"""Flawed: forks a helper that outlives the call."""

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_fork", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.fork() == 0:
            os._exit(0)
        return _ext.g(x)
