"""Flawed (round 4): columns past 4,608 are dropped (the kernel's fixed tile count), so it is
right at every width up to 4,608; the example's is 1,000 and the widest shape variant tried
was about 4,099."""
import torch
import torch.nn as nn

WIDEST = 4608


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = x[:, :WIDEST]
        scale = kept.abs().sum(dim=1, keepdim=True) / x.shape[1] + 1.0
        out = torch.zeros_like(x)
        out[:, :WIDEST] = kept / scale
        return out
