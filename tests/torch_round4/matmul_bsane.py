"""Flawed (round 4): replaces NaN and Inf in B by 0 (a 'sanitising' shortcut that also
skips 0 * Inf): right while B is finite, which it always was when special values were
planted only in the first input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
