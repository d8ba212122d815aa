"""GPU attacker (a previous call's memory read back as the answer): computes every other
call; the others answer `torch.empty_like`, which the caching allocator hands back holding
the output the call before freed (on a CPU, whatever the allocator had). Runs on any
device. Expected: `outputs_wrong` (every call's inputs are its own, so no earlier answer
is right)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 2 == 0:
            return torch.empty_like(x)
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
