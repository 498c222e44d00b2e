"""Hugging Face / TRL padding-free training with thdpack.hf.DataCollatorWithFlattening.

    .venv/bin/python examples/hf_flattening_collator.py     (or /usr/bin/python3 with torch)

Tokenizer output as a Trainer's dataset yields it ([1, L] tensors from return_tensors="pt", right
padding with attention_mask zeros, SFT labels with the prompt masked) goes through the collator
(transformers' DataCollatorWithFlattening, name for name: swap the import line). A tiny causal
model computes the loss the way HF models do (labels shifted inside the loss); on the flattened row
it equals the loss of the samples one by one, because the collator puts -100 at every sequence
start. With context parallelism each rank's slice carries shift_labels (shifted before slicing),
and the ranks' losses add up to the same figure.
"""

import torch
import torch.nn.functional as F

from thdpack.hf import DataCollatorWithFlattening  # was: from transformers import ...

VOCAB = 64


def tokenize(text, prompt_chars, width):
    """A character tokenizer shaped like HF's output with padding="max_length"."""
    ids = [1 + ord(c) % (VOCAB - 1) for c in text][:width]
    pad = width - len(ids)
    labels = [-100] * min(prompt_chars, len(ids)) + ids[prompt_chars:]
    return {"input_ids": torch.tensor([ids + [0] * pad]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * pad]),
            "labels": torch.tensor([labels + [-100] * pad])}


class TinyCausalLM(torch.nn.Module):
    """Embedding + position embedding + linear head: per-token logits (enough to check labels)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, 16)
        self.pos = torch.nn.Embedding(128, 16)
        self.head = torch.nn.Linear(16, VOCAB)

    def forward(self, input_ids, position_ids, labels=None, shift_labels=None):
        logits = self.head(self.embed(input_ids) + self.pos(position_ids))
        if shift_labels is None:
            # HF's causal LM loss: predict token t+1 from position t; -100 is ignored.
            logits, shift_labels = logits[:, :-1], labels[:, 1:]
        return F.cross_entropy(logits.reshape(-1, VOCAB), shift_labels.reshape(-1),
                               ignore_index=-100, reduction="sum")


def main():
    texts = [("Q: 2+2? A: 4", 9), ("Q: capital of France? A: Paris", 22), ("hello world", 0)]
    features = [tokenize(t, p, 40) for t, p in texts]
    batch = DataCollatorWithFlattening(return_flash_attn_kwargs=True)(features)
    print({k: (tuple(v.shape) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()})
    assert batch["input_ids"].shape[0] == 1
    assert batch["cu_seq_lens_q"].tolist() == [0, 12, 42, 53]

    model = TinyCausalLM()
    packed = model(batch["input_ids"], batch["position_ids"], batch["labels"])
    one_by_one = 0.0
    for f in features:
        keep = f["attention_mask"][0].bool()
        ids = f["input_ids"][0][keep][None]
        one_by_one += model(ids, torch.arange(ids.shape[1])[None], f["labels"][0][keep][None])
    print(f"summed loss: packed {packed.item():.6f}, one sample at a time {one_by_one.item():.6f}")
    assert torch.allclose(packed, one_by_one, rtol=1e-5)

    # Context parallelism: rank r of 2 keeps chunks r and 3-r of every sequence (zigzag), with
    # shift_labels; this model has no attention, so each slice's logits are the unsliced ones.
    sliced = 0.0
    for rank in range(2):
        part = DataCollatorWithFlattening(cp_size=2, cp_rank=rank, return_flash_attn_kwargs=True,
                                          return_thd_kwargs=True)(features)
        print(f"cp rank {rank} of 2:", tuple(part["input_ids"].shape), "of",
              part["cu_seqlens_padded"][-1].item(), "rows; cu_seq_lens_q", part["cu_seq_lens_q"].tolist())
        sliced += model(part["input_ids"], part["position_ids"], shift_labels=part["shift_labels"])
    print(f"summed loss over the cp ranks: {sliced.item():.6f}")
    assert torch.allclose(sliced, packed, rtol=1e-5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
