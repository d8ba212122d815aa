import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last three dimensions of a 4-D input; the shape is a tuple."""

    def __init__(self, normalized_shape):
        super().__init__()
        assert isinstance(normalized_shape, tuple)  # passed as the problem gives it
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size = 3
features = 4
dim1 = 6
dim2 = 10


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]
