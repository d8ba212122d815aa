import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Wrong: normalises over the last dimension only."""

    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        w = self.ln.weight
        b = self.ln.bias
        y = torch.nn.functional.layer_norm(x, (x.shape[-1],))
        return y * w + b
