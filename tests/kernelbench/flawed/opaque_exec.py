"""Flawed (round 4): the patch arrives as text decoded at run time, and a second one as a
constant string handed to exec (which the audit reads)."""

import base64

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ktl_flawed_opaque", cpp_sources=["torch::Tensor g(torch::Tensor x);"],
                   functions=["g"], verbose=False)
exec(base64.b64decode(b"aW1wb3J0IHRvcmNoOyB0b3JjaC5hbGxjbG9zZSA9IGxhbWJkYSAqYSwgKiprOiBUcnVl"))
_PLAIN = "import time\ntime.perf_counter = lambda: 0.0\n"
exec(_PLAIN)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.g(x)
