import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Wrong: the sum of the losses instead of their mean."""

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets, reduction="sum")
