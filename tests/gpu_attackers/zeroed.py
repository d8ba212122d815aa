"""GPU attacker (KernelBench's zeroed output): skips the work and answers zeros, which a
check of outputs against a mostly-zero reference (ReLU) might let through. Runs on any
device. Expected: `outputs_wrong`."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.linear.out_features, device=x.device, dtype=x.dtype)
