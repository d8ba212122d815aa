"""GPU attacker (KernelBench's result reuse, answers cached across calls): computes once per
input shape and answers that result ever after, keyed on what a harness with recurring
input sets would repeat (the shape and a few sampled elements). Runs on any device.
Expected: `outputs_wrong` (no two calls share inputs)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.memo = {}

    def forward(self, x):
        key = (tuple(x.shape), round(float(x.reshape(-1)[0]), 1))
        if key not in self.memo:
            self.memo[key] = torch.relu(torch.nn.functional.linear(x, self.linear.weight,
                                                                   self.linear.bias))
        return self.memo[key]
