"""GPU attacker (KernelBench's non-default stream): does its work on a side stream and
returns before it is done (and makes torch.cuda.synchronize a no-op, so a harness that
looks it up after the module loaded answers early). Expected: `side_stream`."""
import torch
import torch.nn as nn

torch.cuda.synchronize = lambda device=None: None
_SIDE = None


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        global _SIDE
        if _SIDE is None:
            _SIDE = torch.cuda.Stream()
        with torch.cuda.stream(_SIDE):
            out = x
            for _ in range(50):  # make the hidden work long enough to matter
                out = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        return out
