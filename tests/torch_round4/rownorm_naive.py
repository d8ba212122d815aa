"""Flawed (round 4): the row's sum of squares accumulated in float32 one column at a time, so
it overflows once the squares near float32's largest value add up, though every norm is
representable (the C path's `correctness.large` class)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        squares = x * x
        acc = torch.zeros(x.shape[0], 1, dtype=x.dtype)
        for j in range(x.shape[1]):
            acc = acc + squares[:, j:j + 1]
        return x / torch.sqrt(acc)
