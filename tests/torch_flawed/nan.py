"""Flawed: NaN-filled outputs (NaN is never a wildcard)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.full((x.shape[0], self.linear.out_features), float("nan"))
