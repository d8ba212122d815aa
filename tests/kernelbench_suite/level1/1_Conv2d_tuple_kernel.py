import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2-D convolution whose kernel, stride and padding are tuples (init arguments)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                              padding=padding)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 3
out_channels = 5
kernel_size = (3, 5)
stride = (1, 2)
padding = (1, 2)
height = 19
width = 23


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
