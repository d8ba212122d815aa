"""The same convolution in channels-last memory order, PyTorch's own faster CPU path: the
honest candidate here is the library, used differently."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x.contiguous(memory_format=torch.channels_last), self.conv.weight,
                     self.conv.bias, padding=self.conv.padding)
        return y.contiguous()
