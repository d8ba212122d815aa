"""Flawed: reads outside its sandbox and opens a socket (both must fail in the sandbox)."""
import os
import socket
from pathlib import Path

import torch
import torch.nn as nn

SEEN = []
for path in ("/root", "/etc/shadow", os.path.expanduser("~/..")):
    try:
        SEEN.append(len(os.listdir(path)) if os.path.isdir(path) else len(Path(path).read_bytes()))
    except OSError as exc:
        SEEN.append(type(exc).__name__)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        if any(isinstance(s, int) for s in SEEN):
            raise RuntimeError(f"read outside the sandbox: {SEEN}")

    def forward(self, x):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
