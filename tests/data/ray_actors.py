import ray
import torch
import torch_xla


def logprobs(model, batch):
    out = model(batch)
    return out[out > 0].mean()


@ray.remote(num_gpus=1)
class PolicyTrainer:
    def __init__(self, model):
        self.model = model

    def step(self, loader, opt):
        for batch in loader:
            loss = logprobs(self.model, batch)
            loss.backward()
            opt.step()
            print(loss.item())


@ray.remote(num_cpus=1)
class CpuWorker:
    def step(self, model, loader, opt):
        device = torch_xla.device()
        for batch in loader:
            loss = model(batch.to(device)).sum()
            loss.backward()
            opt.step()
            print(loss.item())
