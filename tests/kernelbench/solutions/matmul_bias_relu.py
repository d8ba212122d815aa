"""`addmm` adds the bias inside the matmul; ReLU in place saves one more pass."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).relu_()
