"""Flawed: behaves differently when it sees the harness's environment."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_env", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("KTL_CHECK"):
            return F.gelu(x)
        return _ext.g(x)
