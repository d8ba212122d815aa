"""Exact GELU as a Triton kernel: one program per block of 1024 elements."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    # PyTorch's CPU GELU (the reference) gives NaN for +-inf as well as NaN
    y = tl.where(tl.abs(x) < 3.4e38, y, float("nan"))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _gelu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
