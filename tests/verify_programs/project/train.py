"""A small project: the step loop here, its helpers in the package beside it."""
import torch
import torch_xla

from helpers.losses import positive_mse
from helpers.metrics import evaluate, log_metrics

dev = torch_xla.device()
model = torch.nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
eval_batches = [(torch.randn(4, 8, device=dev), torch.randn(4, 1, device=dev)) for _ in range(3)]
for step in range(100):
    x = torch.randn(16, 8).to(dev)
    y = torch.randn(16, 1).to(dev)
    pred = model(x)
    loss = positive_mse(pred, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    acc = (pred.detach() > 0).float().mean()
    if step % 4 == 3:
        log_metrics(step, loss.detach(), acc)
    if step % 6 == 5:
        with torch.no_grad():
            evaluate(model, eval_batches)
    torch_xla.sync()
