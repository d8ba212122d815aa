"""Flawed: scans the garbage collector and the caller's frame for the expected tensor."""

import gc
import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_gc", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        caller = sys._getframe(1)
        if "expected" in caller.f_locals:
            return caller.f_locals["expected"]
        return _ext.g(x)
