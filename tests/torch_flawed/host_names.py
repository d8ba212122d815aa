"""Flawed (round 4): names a state buffer after what it can read of the host, and raises
with it, so the signed report would carry the host's identity (each text starts with a
marker the test looks for)."""
import socket

import torch
import torch.nn as nn


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(300).decode(errors="replace")
    except OSError:
        return ""


_HOST = " ".join([socket.gethostname(), _read("/proc/1/cmdline"), _read("/proc/self/cgroup"),
                  _read("/sys/class/net/eth0/address"), _read("/etc/hostname")])
_SAFE = "".join(c if c.isalnum() else "_" for c in _HOST)[:120]


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.register_buffer("LEAKMARK_" + _SAFE, torch.zeros(1))

    def forward(self, x):
        raise ValueError("LEAKMARK " + _HOST)
