"""Flawed (round 4): the kernel's failure is answered by the library, two helpers away from
the `except` that catches it; nothing in the handler spells torch."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_helper", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
_act = F.gelu


def _exact(x):
    out = torch.empty_like(x)
    out.copy_(_act(x))
    return out


def _recover(x):
    return _exact(x.contiguous())


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.g(x)
        except RuntimeError:
            return self._retry(x)

    def _retry(self, x):
        return _recover(x)
