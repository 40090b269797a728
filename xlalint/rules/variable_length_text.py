"""XLA005's words: the cost of a batch-dependent shape and the fixes, shared by its per-module and project steps."""

COST = (
    "the input shape varies from batch to batch, and each new shape compiles a new XLA graph "
    "(measured: random lengths 8-64 recompile on ~9 steps in 10)"
)
FIX_PAD = (
    "pad to a few fixed lengths (buckets, e.g. the next multiple of 64, or `padding=\"max_length\"` with "
    "`max_length=`) and warm each bucket up once"
)
FIX_COLLATOR = "pass `pad_to_multiple_of=64` (or pad to a fixed `max_length`) and warm the few lengths up once"
FIX_DROP_LAST = "pass `drop_last=True` (or pad the last batch to the full batch size)"

# the rule's examples: code it must stay silent on, and code it must flag (tests/test_rule_examples.py)
EXAMPLES_VALID = [
    # a collator dataclass whose fields round to a multiple, or that its construction sets to a fixed length
    "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass PairCollator:\n    tokenizer: object\n    padding: bool = True\n    pad_to_multiple_of: object = 64\n    def __call__(self, features):\n        return self.tokenizer.pad(features, padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors='pt')\ncollator = PairCollator(tok)\n",
    "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass PairCollator:\n    tokenizer: object\n    padding: bool = True\n    pad_to_multiple_of: object = None\n    def __call__(self, features):\n        return self.tokenizer.pad(features, padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors='pt')\ncollator = PairCollator(tok, padding='max_length')\n",
    "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass PairCollator:\n    tokenizer: object\n    padding: bool = 'max_length'\n    pad_to_multiple_of: object = None\n    def __call__(self, features):\n        return self.tokenizer.pad(features, padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors='pt')\ncollator = PairCollator(tok)\n",
    # every text tokenized to `max_length` in `dataset.map`: the collator has nothing left to pad (peft's
    # fine-tuning examples); a dynamic tokenizer call anywhere in the file makes it a finding again
    "import torch\nfrom transformers import DataCollatorForLanguageModeling\ndef main(tokenizer, dataset, cutoff_len):\n    def tokenize_function(examples):\n        return tokenizer(examples['text'], padding='max_length', truncation=True, max_length=cutoff_len)\n    data = dataset.map(tokenize_function, batched=True)\n    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)\n    return data, collator\n",
    # padded to the longest only to compare lengths (a truncation warning): it never reaches a model
    "import torch\nids = tokenizer(prompt, padding='max_length', max_length=77, truncation=True, return_tensors='pt').input_ids\nuntruncated = tokenizer(prompt, padding='longest', return_tensors='pt').input_ids\nif untruncated.shape[-1] > ids.shape[-1] and not torch.equal(ids, untruncated):\n    print(tokenizer.batch_decode(untruncated[:, 76:-1]))\nout = text_encoder(ids.to(device))\n",
    # one literal batch, tokenized once outside any loop: one shape
    "import torch\nenc = tokenizer(['a photo of a dog'], padding=True, return_tensors='pt')\nout = model(**enc)\n",
    # one call outside any loop: on prompts a function binds only to literals; at a script's (a cell's) top level
    "import torch\ndef demo(model, tokenizer):\n    prompts = ['I believe the meaning of life is', 'The sky is']\n    enc = tokenizer(prompts, padding=True, return_tensors='pt')\n    return model.generate(**enc)\n",
    "import torch\nqueries = load_queries()\nenc = tokenizer(queries, padding=True, return_tensors='pt')\nout = model(**enc)\n",
    "import torch\nenc = tokenizer(texts, padding='max_length', max_length=128, truncation=True, return_tensors='pt')\n",
    "import torch\nfrom transformers import DataCollatorWithPadding\ncollator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)\n",
    # bucketing: the batch max is rounded up to a fixed length
    "import torch\ndef collate_fn(batch):\n    longest = max(len(x) for x in batch)\n    length = (longest + 63) // 64 * 64\n    return torch.zeros(len(batch), length)\n",
    "import torch\nBUCKETS = (16, 32)\ndef collate(batch):\n    longest = max(len(x) for x in batch)\n    target = next(b for b in BUCKETS if b >= longest)\n    return torch.zeros(len(batch), target)\n",
    # pad_sequence once over the whole dataset (one shape), outside any collate function
    "import torch\nfrom torch.nn.utils.rnn import pad_sequence\nall_ids = pad_sequence(sequences, batch_first=True)\n",
    # drop_last=True, and a dataset length that the batch size divides
    "import torch, torch_xla\nfrom torch.utils.data import DataLoader, TensorDataset\nds = TensorDataset(torch.randn(128, 4))\nloader = DataLoader(ds, batch_size=16)\nfor (x,) in loader:\n    model(x).sum().backward()\n    optimizer.step()\n",
    # a wrapper that forwards the caller's arguments (transformers' pad_without_fast_tokenizer_warning)
    "import torch\ndef pad_quietly(tokenizer, *pad_args, **pad_kwargs):\n    return tokenizer.pad(*pad_args, **pad_kwargs)\n",
    # the padding parameter, given "max_length" by functools.partial
    "import torch, functools\ndef encode(batch, tokenizer, padding=False):\n    return tokenizer(batch, padding=padding, max_length=64, truncation=True, return_tensors='pt')\ncollate = functools.partial(encode, tokenizer=tok, padding='max_length')\n",
    # the batch maximum rounded up before it sizes the batch
    "import torch\ndef collate_fn(data):\n    lengths = [len(cap) for cap in data]\n    return torch.zeros(len(data), round_up(max(lengths), 64))\n",
    # no torch_xla in the file: a DataLoader alone is not flagged
    "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=16)\nfor x in loader:\n    model(x).sum().backward()\n    optimizer.step()\n",
]
EXAMPLES_INVALID = [
    # a collator dataclass (SimCSE's, copied from transformers): `padding` defaults to True, no multiple
    "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass PairCollator:\n    tokenizer: object\n    padding: bool = True\n    pad_to_multiple_of: object = None\n    def __call__(self, features):\n        return self.tokenizer.pad(features, padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors='pt')\ncollator = PairCollator(tok)\n",
    "import torch\nfrom torch.nn.utils.rnn import pad_sequence\ndef collate_fn(batch):\n    return pad_sequence(batch, batch_first=True)\n",
    "import torch\ndef my_collate(batch):\n    max_len = max(len(s) for s in batch)\n    out = torch.zeros(len(batch), max_len)\n    return out\n",
    # the batch maximum written inside the size (an image-captioning collate)
    "import torch\ndef collate_fn(data):\n    lengths = [len(cap) for cap in data]\n    targets = torch.zeros(len(data), max(lengths)).long()\n    return targets\n",
    # the longest item of the batch (deepspeech.pytorch's collate, copied by many speech recipes)
    "import torch\ndef _collate_fn(batch):\n    def func(p):\n        return p[0].size(1)\n    longest_sample = max(batch, key=func)[0]\n    inputs = torch.zeros(len(batch), 1, longest_sample.size(0), longest_sample.size(1))\n    return inputs\n",
    "import torch\ndef collate(batch):\n    longest = max(batch, key=lambda s: s.shape[0])\n    return torch.zeros(len(batch), longest.shape[0])\n",
    "import torch\ndef score(model, tokenizer, texts):\n    enc = tokenizer(texts, padding='longest', max_length=128, return_tensors='pt')\n    return model(**enc)\n",
    "import torch\nclass Encoder:\n    def encode(self, texts, device):\n        enc = self.tokenizer(texts, padding=True, return_tensors='pt')\n        return enc.to(device)\n",
    "import torch\ndef collate(features):\n    return tok.pad(features, padding=True, return_tensors='pt')\n",
    "import torch\nfrom transformers import DataCollatorForSeq2Seq\ncollator = DataCollatorForSeq2Seq(tokenizer, model=model)\n",
    # padding=True through functools.partial into the collate function's parameter
    "import torch, functools\ndef encode(batch, tokenizer, padding=False):\n    return tokenizer(batch, padding=padding, max_length=64, truncation=True, return_tensors='pt')\ncollate = functools.partial(encode, tokenizer=tok, padding=True)\n",
    # the Hugging Face examples' idiom: None on a TPU, which has no fp16
    "import torch\nfrom transformers import DataCollatorWithPadding\ncollator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=(8 if accelerator.use_fp16 else None))\n",
    "import torch, torch_xla\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=16, shuffle=True)\nfor x in loader:\n    model(x).sum().backward()\n    optimizer.step()\n",
]
