"""Flawed: returns zeros and lets a background thread fill them in after the call."""
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = torch.zeros(x.shape[0], self.linear.out_features)
        w, b = self.linear.weight.detach().clone(), self.linear.bias.detach().clone()
        xs = x.clone()

        def finish():
            import time
            time.sleep(0.002)
            out.copy_(torch.relu(torch.nn.functional.linear(xs, w, b)))

        threading.Thread(target=finish).start()
        return out
