"""Probe (round 4): each call forks a child that burns at least 0.3 s of its own CPU (by its
own process clock) before the caller, blocked in waitpid, computes the answer. The child
exits before the answer: only an account of every task the module ever started (the run's
cgroup, or reaped children's times) sees its CPU."""
import os
import time

import torch
import torch.nn as nn

BURN_S = 0.3


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        pid = os.fork()
        if pid == 0:
            while time.process_time() < BURN_S:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
