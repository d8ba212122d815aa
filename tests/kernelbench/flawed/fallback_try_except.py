"""Flawed: when the custom kernel raises, PyTorch's own GELU answers instead."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_fallback", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.g(x)
        except RuntimeError:
            return F.gelu(x)
