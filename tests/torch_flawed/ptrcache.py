"""Flawed: caches its answers by the input's data_ptr."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.cache = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        return self.cache[key]
