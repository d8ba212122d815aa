"""Flawed: reaches into raw memory with ctypes."""

import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_ctypes", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.memmove(x.data_ptr(), x.data_ptr(), 4)
        return _ext.g(x)
