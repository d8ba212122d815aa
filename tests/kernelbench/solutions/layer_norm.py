"""LayerNorm as one C++ kernel: per row, one pass for the mean and variance (in double),
one pass writing the scaled and shifted output."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                              double eps) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto xc = x.contiguous();
  auto w = weight.contiguous();
  auto b = bias.contiguous();
  const int64_t n = xc.size(-1);
  const int64_t rows = xc.numel() / n;
  auto out = torch::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = px + r * n;
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < n; ++i) { sum += row[i]; sq += (double)row[i] * row[i]; }
      const double mean = sum / n;
      const double var = sq / n - mean * mean;
      const float inv = (float)(1.0 / std::sqrt((var > 0.0 ? var : 0.0) + eps));
      const float m = (float)mean;
      float* o = po + r * n;
      for (int64_t i = 0; i < n; ++i) o[i] = (row[i] - m) * inv * pw[i] + pb[i];
    }
  });
  return out;
}
"""

_ext = load_inline(name="ktl_fixture_layer_norm", cpp_sources=[_SOURCE],
                   functions=["layer_norm_rows"], extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(features, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layer_norm_rows(x, self.norm.weight, self.norm.bias, self.norm.eps)
