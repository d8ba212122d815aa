"""GPU attacker: slow (a 200-iteration loop per call) and patches CUDA events and the
Python clocks to report almost nothing."""
import time

import torch
import torch.nn as nn

torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
time.perf_counter = lambda: 0.0
time.perf_counter_ns = lambda: 0
time.monotonic_ns = lambda: 0


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = x
        for _ in range(200):
            out = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        return out
