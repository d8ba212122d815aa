"""The op of the flawed solutions here: ReLU of a linear layer (KernelBench format)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [64]
