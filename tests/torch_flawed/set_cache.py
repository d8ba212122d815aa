"""Flawed (round 4): an exact cache per input set. The bench's inputs were a few recurring
sets with one element changed; this recomputes only the rows that changed since it last saw
a set with the same row count. Inputs changed in every element, never repeating, leave it
nothing to reuse (and its answers stay right: it is a cost forgery, not a wrong answer)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.seen = {}
        self.reused_rows = 0

    def forward(self, x):
        key = (tuple(x.shape), float(x[0, 0]))
        hit = self.seen.get(key)
        if hit is not None and hit[0].shape == x.shape:
            old_x, old_y = hit
            changed = (old_x != x).any(dim=1)
            y = old_y.clone()
            if bool(changed.any()):
                y[changed] = torch.relu(torch.nn.functional.linear(
                    x[changed], self.linear.weight, self.linear.bias))
            self.reused_rows += int((~changed).sum())
        else:
            y = torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
        self.seen[key] = (x.clone(), y.clone())
        return y
