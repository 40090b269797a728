"""A small transformer classifier trained the slow way: every classic torch_xla anti-pattern.

Run: PJRT_DEVICE=CPU python examples/slow_train.py --steps 10
Its fixed twin is fast_train.py. The `# expect:` marks say what xlalint must report.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_ID = 0
VOCAB = 512
NUM_CLASSES = 4


class RandomTextDataset(Dataset):
    """Fake token sequences of 8..16 tokens with a class label."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(8, 17, (n,), generator=g)
        self.sequences = [torch.randint(1, VOCAB, (int(k),), generator=g) for k in lengths]
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, i):
        return self.sequences[i], self.labels[i]


def collate(batch):
    sequences, labels = zip(*batch)
    input_ids = pad_sequence(sequences, batch_first=True, padding_value=PAD_ID)  # expect: XLA005
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
    model.eval()  # expect: XLA004
    correct = 0
    with torch.no_grad():
        for input_ids, labels in batches:
            correct += (model(input_ids).argmax(-1) == labels).sum().item()  # expect: XLA001
    model.train()
    return correct / sum(len(labels) for _, labels in batches)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=5)
    args = parser.parse_args()

    device = torch_xla.device()
    train_loader = DataLoader(RandomTextDataset(76, seed=0), batch_size=8, shuffle=True, collate_fn=collate)  # expect: XLA005
    val_batches = [(x.to(device), y.to(device)) for x, y in DataLoader(RandomTextDataset(16, seed=1), batch_size=8, collate_fn=collate, drop_last=True)]
    model = TinyClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    step, running_loss = 0, 0.0
    model.train()
    while step < args.steps:
        for input_ids, labels in train_loader:
            input_ids, labels = input_ids.to(device), labels.to(device)
            optimizer.zero_grad()
            per_example = F.cross_entropy(model(input_ids), labels, reduction="none")
            loss = per_example.mean()
            loss.backward()
            hard = per_example[per_example > loss]  # expect: XLA003
            hard_fraction = len(hard) / len(labels)
            optimizer.step()
            running_loss += loss.item()  # expect: XLA001
            if loss > 5.0:  # expect: XLA002
                print("warning: loss spike at step", step)
            print("step", step, "loss", loss, f"hard {hard_fraction:.2f}")  # expect: XLA006
            if step % args.eval_every == 0:
                print(f"step {step}: val accuracy {evaluate(model, val_batches):.3f}")
            torch_xla.sync()
            step += 1
            if step >= args.steps:
                break
    print(f"mean train loss {running_loss / step:.4f}")


if __name__ == "__main__":
    main()
