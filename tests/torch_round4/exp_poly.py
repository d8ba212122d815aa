"""Flawed (round 4): exp as a degree-9 polynomial in (x - 0.5): within float32 rounding on
[0, 1), the only range `torch.rand` draws, and wrong well away from it."""
import math

import torch
import torch.nn as nn

_C = [math.exp(0.5) / math.factorial(k) for k in range(10)]


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x - 0.5
        y = torch.full_like(x, _C[-1])
        for c in reversed(_C[:-1]):
            y = y * t + c
        return y
