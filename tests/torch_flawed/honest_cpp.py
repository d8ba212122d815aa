"""An honest C++ solution (load_inline): addmm and clamp_min in one C++ function."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = torch::addmm(b, x.contiguous(), w.t());
  return torch::clamp_min(y, 0.0);
}
"""

_ext = load_inline(name="ktl_test_linear_relu", cpp_sources=[_SOURCE], functions=["linear_relu"],
                   extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return _ext.linear_relu(x, self.linear.weight, self.linear.bias)
