"""The fixed twin of slow_train.py: same model and data, no host reads, shapes fixed.

Run: PJRT_DEVICE=CPU python examples/fast_train.py --steps 10
xlalint must report nothing here.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader, Dataset

PAD_ID = 0
VOCAB = 512
NUM_CLASSES = 4
MAX_LEN = 16


class RandomTextDataset(Dataset):
    """Fake token sequences of 8..16 tokens with a class label."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(8, MAX_LEN + 1, (n,), generator=g)
        self.sequences = [torch.randint(1, VOCAB, (int(k),), generator=g) for k in lengths]
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, i):
        return self.sequences[i], self.labels[i]


def collate_fixed(batch):
    """Pad every batch to MAX_LEN, so every step has the same shapes."""
    sequences, labels = zip(*batch)
    input_ids = torch.full((len(sequences), MAX_LEN), PAD_ID, dtype=torch.long)
    for i, seq in enumerate(sequences):
        input_ids[i, :len(seq)] = seq[:MAX_LEN]
    return input_ids, torch.stack(labels)


class TinyClassifier(nn.Module):
    """Token embeddings, a position-wise MLP, masked mean pooling and a linear head."""

    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD_ID)
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, NUM_CLASSES)

    def forward(self, input_ids):
        mask = input_ids.ne(PAD_ID).unsqueeze(-1).float()
        x = self.embed(input_ids)
        x = x + self.mlp(x)
        return self.head((x * mask).sum(1) / mask.sum(1))


def evaluate(model, batches):
    model.eval()  # ok: called once, after training
    correct = torch.zeros((), dtype=torch.long, device=batches[0][1].device)
    total = 0
    with torch.no_grad():
        for input_ids, labels in batches:
            correct += (model(input_ids).argmax(-1) == labels).sum()
            total += labels.size(0)
    return correct.item() / total  # ok: after the evaluation loop


def log_step(step, loss, hard_fraction, spikes):
    print(f"step {step} loss {loss.item():.4f} hard {hard_fraction.item():.2f} spikes {int(spikes)}")  # ok: a step closure


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--log-every", type=int, default=1)
    args = parser.parse_args()

    device = torch_xla.device()
    train_loader = DataLoader(RandomTextDataset(76, seed=0), batch_size=8, shuffle=True, collate_fn=collate_fixed, drop_last=True)
    val_batches = [(x.to(device), y.to(device)) for x, y in DataLoader(RandomTextDataset(16, seed=1), batch_size=8, collate_fn=collate_fixed, drop_last=True)]
    model = TinyClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    step = 0
    running_loss = torch.zeros((), device=device)
    spikes = torch.zeros((), dtype=torch.long, device=device)
    model.train()
    while step < args.steps:
        for input_ids, labels in train_loader:
            input_ids, labels = input_ids.to(device), labels.to(device)
            optimizer.zero_grad()
            per_example = F.cross_entropy(model(input_ids), labels, reduction="none")
            loss = per_example.mean()
            loss.backward()
            optimizer.step()
            hard_fraction = (per_example > loss).float().mean()  # ok: static shape
            running_loss += loss.detach()
            spikes += torch.where(loss > 5.0, 1, 0)  # ok: stays on the device
            if step % args.log_every == 0:
                xm.add_step_closure(log_step, args=(step, loss, hard_fraction, spikes))
            torch_xla.sync()
            step += 1
            if step >= args.steps:
                break
    print(f"mean train loss {running_loss.item() / step:.4f}")  # ok: after training
    print(f"val accuracy {evaluate(model, val_batches):.3f}")


if __name__ == "__main__":
    main()
