"""Logging helpers: called every few steps from train.py."""
import torch


def log_metrics(step, loss, acc):
    print(f"step {step} loss {loss:.4f}")  # a host read each time it runs
    return float(acc)  # and another one


def evaluate(model, batches):
    total = 0.0
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        total += loss.item()  # one read per eval batch
    return total / len(batches)
