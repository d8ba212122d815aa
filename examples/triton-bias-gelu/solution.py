"""Bias + exact GELU as one Triton kernel: one program per row, the row in one block.

On the CPU it runs through Triton's interpreter (TRITON_INTERPRET=1): correct, not fast;
compiled on a GPU it reads x once and writes the output once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_rows(x_ptr, bias_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    b = tl.load(bias_ptr + cols, mask=mask, other=0.0)
    v = x + b
    # as PyTorch's GELU: +inf stays +inf, -inf gives NaN (-inf * 0), NaN stays NaN
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        out = torch.empty_like(x)
        rows = x.numel() // n_cols if n_cols else 0
        if rows:
            _bias_gelu_rows[(rows,)](x, self.bias.detach().contiguous(), out, n_cols,
                                     BLOCK=triton.next_power_of_2(n_cols))
        return out
