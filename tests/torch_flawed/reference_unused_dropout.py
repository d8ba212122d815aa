"""The attacker's op: ReLU of a linear layer, with a Dropout member it never calls (to try
to have the two-thread row skipped as if its answers were random)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [64]
