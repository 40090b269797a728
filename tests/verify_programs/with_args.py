"""Reads the loss on the host only when asked to on the command line (after `--`)."""
import argparse

import torch
import torch_xla

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--read-loss", action="store_true")
args = parser.parse_args()

dev = torch_xla.device()
w = torch.randn(8, 8, device=dev, requires_grad=True)
for step in range(args.steps):
    loss = (w @ torch.randn(8, 8).to(dev)).pow(2).mean()
    if args.read_loss:
        print(f"step {step} loss {loss.item():.3f}")
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad = None
    torch_xla.sync()
