"""An honest runtime-triton solution: the linear layer by PyTorch, the ReLU by a Triton kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = (x > 0) | (x != x)  # NaN stays NaN, as torch.relu keeps it
    tl.store(out_ptr + offsets, tl.where(keep, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        _relu[(triton.cdiv(n, 256),)](y, out, n, BLOCK=256)
        return out
