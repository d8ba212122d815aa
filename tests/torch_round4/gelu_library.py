"""Honest control (round 4): the library's own GELU as the solution. In float32 PyTorch gives
NaN at +inf where the float64 reference gives inf: reported, never failed."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)
