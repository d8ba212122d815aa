"""An honest solution: addmm and clamp, the reference's answer computed another way."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.clamp_min(torch.addmm(self.linear.bias, x, self.linear.weight.t()), 0.0)
