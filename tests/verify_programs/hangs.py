"""Hangs before the first step."""
import time

import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(4, 4, device=dev)
while True:
    time.sleep(0.5)  # waiting for a queue that never fills
