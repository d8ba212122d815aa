"""Flawed: slow (50 ms per call) and patches Python's clocks to look fast."""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        time.sleep(0.05)
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))


_start = time.perf_counter()
time.perf_counter = lambda: _start
time.perf_counter_ns = lambda: int(_start * 1e9)
time.time = lambda: _start
