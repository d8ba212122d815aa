"""GPU attacker (CUDA-graph replay of stale inputs): captures the op in a CUDA graph on its
first call's input buffer and replays that graph on every later call, whatever buffer the
call's inputs are in, so it answers from the first buffer's contents. Needs CUDA.
Expected: `outputs_wrong`."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.graph = None
        self.out = None

    def forward(self, x):
        if self.graph is None:
            self.static_x = x
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up before capture, as the docs ask
                torch.relu(torch.nn.functional.linear(x, self.linear.weight, self.linear.bias))
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = torch.relu(torch.nn.functional.linear(
                    self.static_x, self.linear.weight, self.linear.bias))
        self.graph.replay()
        return self.out
