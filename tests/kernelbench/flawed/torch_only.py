"""Flawed claim of a custom kernel: ModelNew is PyTorch's GELU under another name."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)
