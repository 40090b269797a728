"""Trains "forever" and starts a helper process in a session of its own: the signal tests stop it.

Writes its own pid and the helper's pid to the file named by its first argument once the loop is running.
"""
import os
import subprocess
import sys
import time

import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(8, 8, device=dev)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
for step in range(1_000_000):
    w = torch.tanh(w @ w) * 0.5
    loss = w.sum()
    print(f"step {step} loss {loss.item():.4f}")  # a host read on every step
    torch_xla.sync()
    if step == 3:
        with open(sys.argv[1] + ".tmp", "w") as fh:
            fh.write(f"{os.getpid()} {helper.pid}\n")
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(0.05)
