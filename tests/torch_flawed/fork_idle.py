"""Flawed (round 4): each call forks a child that computes the answer into a shared mapping
while the caller sets itself SCHED_IDLE and spins: the child's CPU shows as the caller's
run-queue wait, which a per-thread account subtracts. The cost must include the child's CPU
(the whole tree, in the run's cgroup) and the scheduling change must be refused."""
import contextlib
import mmap
import os

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        rows, cols = x.shape[0], self.linear.weight.shape[0]
        shared = mmap.mmap(-1, rows * cols * 4)
        pid = os.fork()
        if pid == 0:
            out = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
            shared.write(out.detach().numpy().astype(np.float32).tobytes())
            os._exit(0)
        with contextlib.suppress(OSError):  # refused in the sandbox (EPERM): spins at normal policy
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            pass
        flat = np.frombuffer(shared, dtype=np.float32, count=rows * cols).copy()
        return torch.from_numpy(flat.reshape(rows, cols))
