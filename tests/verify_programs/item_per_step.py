"""A training loop that reads the loss on the host every step (XLA001), mid-step."""
import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for step in range(100):
    x = torch.randn(8, 16).to(dev)
    y = torch.randint(0, 4, (8,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    total += loss.item()  # host read mid-step
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch_xla.sync()
print("done", total)
