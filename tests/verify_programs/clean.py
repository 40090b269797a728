"""The clean twin of item_per_step.py: the loss is accumulated on the device, read once at the end."""
import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = torch.zeros((), device=dev)
for step in range(100):
    x = torch.randn(8, 16).to(dev)
    y = torch.randint(0, 4, (8,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    total += loss.detach()
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch_xla.sync()
print("done", total.item())
