"""Flawed: right answer, but it scales its input in place."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        x.mul_(0.5)
        return y
