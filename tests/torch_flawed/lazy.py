"""Flawed: returns a tensor subclass (a lazy value the harness would compute later)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return Lazy(torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias)))


class Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data)
