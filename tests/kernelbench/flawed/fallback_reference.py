"""Flawed: imports the reference and calls it when the kernel fails."""

import torch
import torch.nn as nn
from reference import Model
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_ref", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ref = Model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.g(x)
        except Exception:
            return self.ref(x)
