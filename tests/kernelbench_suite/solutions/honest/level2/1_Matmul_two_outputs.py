import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A linear layer on a 3-D input whose forward returns two outputs and takes a flag."""

    def __init__(self, in_features, out_features, bias):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x, mode):
        y = self.linear(x)
        if mode == "relu":
            y = torch.relu(y)
        return y, y.sum(dim=-1)


batch_size = 4
seq_len = 9
in_features = 24
out_features = 17


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features), "relu"]


def get_init_inputs():
    return [in_features, out_features, True]
