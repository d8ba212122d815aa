"""Flawed: its C++ does not compile (a compile error is a verdict: build fails)."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_test_broken", cpp_sources=["torch::Tensor f(torch::Tensor x) { return x +; }"],
                   functions=["f"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        return _ext.f(x)
