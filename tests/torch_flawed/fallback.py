"""Flawed: a custom path that always fails, and a try/except that lets PyTorch answer."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def fast_linear_relu(x, weight, bias):
    raise RuntimeError("custom kernel not available for this shape")


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        try:
            return fast_linear_relu(x, self.linear.weight, self.linear.bias)
        except RuntimeError:
            return torch.relu(F.linear(x, self.linear.weight, self.linear.bias))
