"""Two entry points in one file; `functions.py::train_step_reads` is the target, the main block must not run."""
import torch
import torch_xla


def train_step_reads():
    torch.manual_seed(0)
    dev = torch_xla.device()
    w = torch.randn(8, 8, device=dev)
    for step in range(50):
        w = torch.tanh(w @ w)
        if w.sum() > 0:  # tensor condition: a host read every step
            w = w * 0.9
        torch_xla.sync()


def unused():
    raise RuntimeError("not the target")


if __name__ == "__main__":
    raise SystemExit("the __main__ block ran: it must not when a ::function is the target")
