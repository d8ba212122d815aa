"""Flawed: starts a process on every call that outlives it."""
import subprocess
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
