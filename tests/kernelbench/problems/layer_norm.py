"""Layer normalisation over the last dimension, with a learned scale and shift."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(features, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch = 64
features = 512


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features]
