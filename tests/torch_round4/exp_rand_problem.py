"""exp of inputs drawn like `torch.rand` (KernelBench format)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


rows = 64
cols = 256


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
