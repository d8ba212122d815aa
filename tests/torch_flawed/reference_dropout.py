"""An op that draws random numbers in forward: dropout in training mode (as KernelBench's
Matmul_Dropout_Softmax leaves it), between a linear layer and a ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.dropout = nn.Dropout(0.3)

    def forward(self, x):
        return torch.relu(self.dropout(self.linear(x)))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [64]
