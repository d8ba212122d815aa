"""Flawed (round 4): softmax without the row maximum subtracted. Exact for the example's
standard normal logits; exp overflows float32 past 88 and the row becomes NaN."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)
