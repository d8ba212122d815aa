import torch.nn as nn


class ModelNew(nn.Module):
    """Wrong: divides by one more than the count (a number close to the mean, never equal)."""

    def forward(self, x):
        return (x * x).sum().item() / (x.numel() + 1)
