"""Flawed: writes its own answer frame (a huge length) into the driver's answer pipe."""
import os
import struct
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        os.write(int(sys.argv[3]), struct.pack("<I", 0x7FFFFFFF))
        return torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
