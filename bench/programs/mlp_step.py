"""The --verify overhead benchmark's program: a 12-block MLP with AdamW, one sync per step."""
import sys

import torch
import torch.nn as nn
import torch_xla

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(*[Block(128) for _ in range(12)], nn.Linear(128, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(STEPS):
        x = torch.randn(64, 128).to(device)
        y = torch.randint(0, 10, (64,)).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()


if __name__ == "__main__":
    main()
