"""Exact GELU in one C++ pass: 0.5 * x * (1 + erf(x / sqrt(2)))."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu_erf(torch::Tensor x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = xc.numel();
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = px[i];
      // PyTorch's CPU GELU (the reference) gives NaN for +-inf as well as NaN
      po[i] = std::isfinite(v) ? 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f))
                               : NAN;
    }
  });
  return out;
}
"""

_ext = load_inline(name="ktl_fixture_gelu", cpp_sources=[_SOURCE], functions=["gelu_erf"],
                   extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_erf(x)
