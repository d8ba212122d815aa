"""Flawed: serves the tensor that holds its first answer on every later call."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.out = None

    def forward(self, x):
        if self.out is None:
            self.out = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        return self.out
