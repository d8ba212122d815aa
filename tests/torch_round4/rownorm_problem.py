"""Each row divided by its Euclidean norm, taken in float64 (KernelBench format): right at
float32 for every row whose norm float32 can hold (torch's own float32 norm on one thread
sums in float32 and overflows first, which a check reports and never fails)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x.double(), dim=1, keepdim=True).to(x.dtype)


batch_size = 8
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
