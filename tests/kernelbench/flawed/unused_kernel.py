"""Flawed: builds an extension for show and never calls it."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_unused", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)
