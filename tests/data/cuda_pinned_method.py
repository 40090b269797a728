import torch



class LM:
    def __init__(self, model, device):
        self.device = device
        self.model = model.to(self.device)

    def encode(self, text):
        return self.tokenizer(text, return_tensors="pt").to(self.device)

    def _generate(self, inputs, max_length, **generation_kwargs):
        return self.model.generate(**inputs, max_length=max_length, **generation_kwargs)

    def generate_until(self, requests):
        out = []
        for text in requests:
            inputs = self.encode(text)
            inputs["input_ids"] = inputs["input_ids"].to("cuda")
            cont = self._generate(inputs, max_length=32)
            out.append(cont.tolist())
        return out

    def loglikelihood(self, requests):
        out = []
        for ids in requests:
            logits = self.model(ids.to(self.device))
            out.append(logits.sum().item())
        return out
