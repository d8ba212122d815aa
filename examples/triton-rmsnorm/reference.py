"""RMSNorm over the rows of a matrix, with a learned scale (as in LLaMA-style models).

PyTorch eager makes several passes: square, mean, rsqrt, two multiplies, with a
temporary for each; on a GPU each is its own kernel launch and its own trip through
memory."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


rows = 256
features = 2048


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
