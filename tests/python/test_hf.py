"""thdpack.hf.ThdCollator: exactly transformers' DataCollatorWithFlattening output on tokenizer-shaped
features (checked against a transcription of its documented loop), the attention-mask and
[1, L] forms, padding to a divisor, and Transformer Engine's zigzag CP slices."""

import numpy as np
import pytest
import torch

import thdpack
from thdpack.hf import ThdCollator


def hf_flattening(features, separator_id=-100):
    """DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True), as its
    documentation and source describe it: lists in, lists concatenated."""
    batch = {"input_ids": [], "labels": [], "position_ids": [], "seq_idx": []}
    cu, longest = [0], 0
    for i, f in enumerate(features):
        ids = list(f["input_ids"])
        batch["input_ids"] += ids
        batch["labels"] += [separator_id] + list(f.get("labels", ids))[1:]
        batch["position_ids"] += list(range(len(ids)))
        batch["seq_idx"] += [i] * len(ids)
        cu.append(cu[-1] + len(ids))
        longest = max(longest, len(ids))
    out = {k: torch.tensor([v], dtype=torch.int32 if k == "seq_idx" else torch.int64)
           for k, v in batch.items()}
    out["cu_seq_lens_q"] = out["cu_seq_lens_k"] = torch.tensor(cu, dtype=torch.int32)
    out["max_length_q"] = out["max_length_k"] = longest
    return out


def _assert_same(got, want):
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype, key
            assert torch.equal(got[key], value), key
        else:
            assert type(got[key]) is int and got[key] == value, key


def test_small_example():
    out = ThdCollator()([{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}])
    assert out["input_ids"].tolist() == [[1, 2, 3, 4, 5]]
    assert out["labels"].tolist() == [[-100, 2, 3, -100, 5]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1]]
    assert out["cu_seq_lens_q"].tolist() == [0, 3, 5] and out["max_length_k"] == 3


@pytest.mark.parametrize("seed", range(40))
def test_matches_hf_on_random_features(seed):
    rng = np.random.default_rng(seed)
    features = []
    for _ in range(int(rng.integers(1, 9))):
        n = int(rng.integers(1, 40))
        f = {"input_ids": rng.integers(0, 32000, n).tolist()}
        if seed % 2:
            labels = list(f["input_ids"])
            prompt = int(rng.integers(0, n))
            labels[:prompt] = [-100] * prompt  # SFT: prompt masked
            f["labels"] = labels
        features.append(f)
    _assert_same(ThdCollator(return_seq_idx=True)(features),
                 hf_flattening(features))


@pytest.mark.parametrize("side", ["right", "left"])
def test_tokenizer_output_with_padding_and_batch_dim(side):
    """return_tensors="pt" gives [1, L] tensors; a padded batch carries attention_mask zeros."""
    real = [[5, 6, 7], [8, 9]]
    features = []
    for ids in real:
        pad = [0] * (4 - len(ids))
        padded = pad + ids if side == "left" else ids + pad
        mask = [0] * len(pad) + [1] * len(ids) if side == "left" else [1] * len(ids) + [0] * len(pad)
        features.append({"input_ids": torch.tensor([padded]),
                         "attention_mask": torch.tensor([mask]),
                         "labels": torch.tensor([padded])})
    _assert_same(ThdCollator(return_seq_idx=True)(features),
                 hf_flattening([{"input_ids": ids} for ids in real]))


def test_padding_divisor():
    out = ThdCollator(pad_to_multiple_of=4, pad_token_id=7, return_thd_kwargs=True)(
        [{"input_ids": [1, 2, 3, 4, 5]}, {"input_ids": [6]}])
    assert out["input_ids"].tolist() == [[1, 2, 3, 4, 5, 7, 7, 7, 6, 7, 7, 7]]
    assert out["labels"].tolist() == [[-100, 2, 3, 4, 5, -100, -100, -100, -100, -100, -100, -100]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]]
    assert out["cu_seq_lens_q"].tolist() == [0, 8, 12] and out["max_length_q"] == 8
    assert out["cu_seqlens"].tolist() == [0, 5, 6]
    assert out["cu_seqlens_padded"].tolist() == [0, 8, 12] and out["max_seqlen"] == 8


def test_cp_zigzag_example_from_transformer_engine():
    # cp=2, padded lengths [8, 4]: rank 0 holds global rows [0,1,6,7, 8,11], rank 1 [2,3,4,5, 9,10].
    features = [{"input_ids": list(range(100, 108))}, {"input_ids": [200, 201, 202, 203]}]
    rank0 = ThdCollator(cp_size=2, cp_rank=0)(features)
    rank1 = ThdCollator(cp_size=2, cp_rank=1)(features)
    assert rank0["input_ids"].tolist() == [[100, 101, 106, 107, 200, 203]]
    assert rank1["input_ids"].tolist() == [[102, 103, 104, 105, 201, 202]]
    assert rank1["position_ids"].tolist() == [[2, 3, 4, 5, 1, 2]]
    assert rank0["cu_seq_lens_q"].tolist() == [0, 8, 12]  # global, as THD CP attention wants


@pytest.mark.parametrize("seed", range(20))
def test_cp_slices_partition_the_padded_row(seed):
    rng = np.random.default_rng(seed)
    cp = int(rng.choice([2, 4]))
    features = [{"input_ids": rng.integers(1, 1000, int(rng.integers(1, 50))).tolist()}
                for _ in range(int(rng.integers(1, 6)))]
    whole = ThdCollator(pad_to_multiple_of=2 * cp, return_seq_idx=True)(features)
    rows = []
    for r in range(cp):
        part = ThdCollator(cp_size=cp, cp_rank=r, return_seq_idx=True)(features)
        index = torch.from_numpy(thdpack.cp_global_rows(
            np.asarray(whole["cu_seq_lens_q"]), np.asarray(whole["cu_seq_lens_q"]), cp, r))
        for key in ("input_ids", "labels", "position_ids", "seq_idx"):
            assert torch.equal(part[key][0], whole[key][0][index]), key
        rows.append(index)
    assert sorted(torch.cat(rows).tolist()) == list(range(whole["input_ids"].shape[1]))


def test_numpy_output_and_errors():
    out = ThdCollator(return_tensors="np")([{"input_ids": np.array([3, 4])}])
    assert isinstance(out["input_ids"], np.ndarray) and out["input_ids"].shape == (1, 2)
    with pytest.raises(thdpack.InvalidArgument, match="feature 1"):
        ThdCollator()([{"input_ids": [1]}, {"input_ids": [[1, 2], [3, 4]]}])
    with pytest.raises(thdpack.InvalidArgument, match="labels"):
        ThdCollator()([{"input_ids": [1, 2], "labels": [1]}])
    with pytest.raises(thdpack.InvalidArgument, match="no tokens"):
        ThdCollator()([{"input_ids": [1, 2], "attention_mask": [0, 0]}])
    with pytest.raises(thdpack.InvalidArgument, match="cp_rank"):
        ThdCollator(cp_size=2, cp_rank=2)


@pytest.mark.parametrize("input_ids,needle", [
    ([1.9, 2.5, -3.0], "input_ids must be integers"),
    ([1.0, 2.0], "input_ids must be integers"),
    ([True, False], "input_ids must be integers"),
    (np.array([1, 2], dtype=np.float32), "input_ids must be integers"),
    ([1, 2, -3], r"input_ids\[2\] is -3"),
    (torch.tensor([[4, -1]]), r"input_ids\[1\] is -1"),
])
def test_token_ids_that_are_not_non_negative_integers_are_refused(input_ids, needle):
    with pytest.raises(thdpack.InvalidArgument, match=needle):
        ThdCollator()([{"input_ids": input_ids}])


def test_labels_must_be_integers_but_may_be_negative():
    with pytest.raises(thdpack.InvalidArgument, match="labels must be integers"):
        ThdCollator()([{"input_ids": [1, 2], "labels": [1.5, 2.0]}])
    out = ThdCollator(return_tensors="np")([{"input_ids": [1, 2], "labels": [-100, 2]}])
    assert list(np.asarray(out["labels"]).ravel())[:2] == [-100, 2]
