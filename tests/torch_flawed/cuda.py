"""A CUDA solution (load_inline with cuda_sources): built and run only where a GPU is."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
__global__ void relu_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

_ext = load_inline(name="ktl_test_cuda", cpp_sources=["void relu(torch::Tensor x);"],
                   cuda_sources=[_CUDA], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x).relu()
