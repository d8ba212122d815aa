"""RMSNorm fused into one Triton kernel: one program per row reads the row once, and
writes x * rsqrt(mean(x^2) + eps) * weight once; no temporaries, one launch.

Compiled on a GPU it moves a third of the bytes PyTorch eager's five kernels move; on the
CPU it runs through Triton's interpreter (TRITON_INTERPRET=1): correct, not fast, not
timed."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean = tl.sum(x * x, axis=0) / n_cols
    y = x * (1.0 / tl.sqrt(mean + eps)) * w
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        out = torch.empty_like(x)
        rows = x.numel() // n_cols if n_cols else 0
        if rows:
            _rmsnorm_rows[(rows,)](x, self.weight.detach().contiguous(), out, n_cols, self.eps,
                                   BLOCK=triton.next_power_of_2(n_cols))
        return out
