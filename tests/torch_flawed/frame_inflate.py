"""Flawed (round 4): wraps the worker script's frame reader (the worker runs as __main__) so
the empty round trip that calibrates every batch is slower, and more is subtracted from the
timed calls. Static: a harness_access finding; at run time the worker's frame I/O is
bound before the candidate is imported, so the wrapper is never on its path."""
import sys
import time

import torch
import torch.nn as nn

_main = sys.modules.get("__main__")
_read = getattr(_main, "read_frame", None)
if _read is not None:
    def _slow(fd, limit, _real=_read):
        frame = _real(fd, limit)
        if len(frame) < 48:
            time.sleep(0.002)
        return frame

    _main.read_frame = _slow


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
