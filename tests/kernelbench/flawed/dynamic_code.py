"""Flawed: the real forward arrives as a string this audit cannot read."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_exec", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
_CODE = "def hidden(x):\n    return x\n"


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scope: dict = {}
        exec(_CODE, scope)
        return scope["hidden"](_ext.g(x))
