"""Flawed (round 4): a memo keyed by a sample of 8 elements answers stale whenever the sample
matches, whatever changed elsewhere. An input set changed in one element mostly keeps the
sample; a fresh input changed in every element never does, and a full comparison of a
random timed call catches a stale answer."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.memo = {}

    def forward(self, x):
        flat = x.reshape(-1)
        idx = torch.linspace(0, flat.numel() - 1, 8).long()
        key = (tuple(x.shape), tuple(flat[idx].tolist()))
        if key not in self.memo:
            self.memo[key] = torch.relu(torch.nn.functional.linear(
                x, self.linear.weight, self.linear.bias))
        return self.memo[key].clone()
