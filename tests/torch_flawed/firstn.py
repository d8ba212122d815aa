"""Flawed: right for its first 4 calls, zeros after."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 4:
            return torch.zeros(x.shape[0], self.linear.out_features)
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
