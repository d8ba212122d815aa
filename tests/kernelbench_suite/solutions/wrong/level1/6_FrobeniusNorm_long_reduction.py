import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Wrong: the norm of the first half of the batch only (a shortcut a loose kernel takes)."""

    def forward(self, x):
        half = x[: max(1, x.shape[0] // 2)]
        return x / (torch.norm(half, p="fro") * 2 ** 0.5)
