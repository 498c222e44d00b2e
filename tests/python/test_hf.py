"""thdpack.hf: DataCollatorWithFlattening is transformers' collator name for name and output for
output (compared with the installed transformers on random features and every option); ThdCollator
keeps its defaults; the attention-mask and [1, L] forms, padding to a divisor, Transformer Engine's
zigzag CP slices, and CP shift_labels whose per-rank losses add up to the unsliced loss of a real
transformers causal LM."""

import inspect

import numpy as np
import pytest
import torch
import transformers

import thdpack
from thdpack.hf import DataCollatorWithFlattening, ThdCollator


def _assert_same(got, want):
    """Same keys in the same order; tensors and arrays of the same type, dtype, shape and values;
    Python ints where transformers gives Python ints."""
    assert list(got) == list(want)
    for key, value in want.items():
        assert type(got[key]) is type(value), key
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert torch.equal(got[key], value), key
        elif isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert np.array_equal(got[key], value), key
        else:
            assert got[key] == value, key


def hf_flattening(features, separator_id=-100):
    """transformers' collator with flash-attention kwargs and seq_idx, on list features."""
    return transformers.DataCollatorWithFlattening(
        return_flash_attn_kwargs=True, return_seq_idx=True)(
            [{k: list(v) for k, v in f.items()} for f in features], separator_id=separator_id)


def test_signature_is_transformers():
    theirs = inspect.signature(transformers.DataCollatorWithFlattening.__init__).parameters
    ours = inspect.signature(DataCollatorWithFlattening.__init__).parameters
    for name, param in theirs.items():
        if param.kind is param.KEYWORD_ONLY:
            assert name in ours and ours[name].default == param.default, name
    # return_tensors is the dataclass field of DefaultDataCollator, the one positional argument.
    assert transformers.DataCollatorWithFlattening().return_tensors == ours["return_tensors"].default
    assert list(ours)[1] == "return_tensors"
    assert DataCollatorWithFlattening("np").return_tensors == "np"
    theirs = inspect.signature(transformers.DataCollatorWithFlattening.__call__).parameters
    ours = inspect.signature(DataCollatorWithFlattening.__call__).parameters
    assert [(n, p.default) for n, p in theirs.items()] == [(n, p.default) for n, p in ours.items()]
    # Attributes a Trainer or a user may read.
    a, b = transformers.DataCollatorWithFlattening(), DataCollatorWithFlattening()
    for name in ("return_tensors", "return_position_ids", "separator_id",
                 "return_flash_attn_kwargs", "return_seq_idx"):
        assert getattr(a, name) == getattr(b, name), name


def _random_case(rng):
    """Random features in the forms transformers' collator takes, and random options."""
    with_labels = bool(rng.integers(2))
    form = rng.choice(["list", "numpy", "torch"])
    mask = bool(rng.integers(2))  # all-ones attention_mask, as a tokenizer without padding gives
    features = []
    for _ in range(int(rng.integers(1, 9))):
        n = int(rng.choice([1, 2, int(rng.integers(1, 64)), int(rng.integers(64, 300))]))
        ids = rng.integers(0, 32000, n)
        f = {"input_ids": ids}
        if with_labels:
            labels = ids.copy()
            labels[:int(rng.integers(0, n + 1))] = -100  # SFT: prompt masked
            f["labels"] = labels
        if mask:
            f["attention_mask"] = np.ones(n, dtype=np.int64)
        if form == "list":
            f = {k: v.tolist() for k, v in f.items()}
        elif form == "torch":
            f = {k: torch.from_numpy(v) for k, v in f.items()}
        features.append(f)
    options = {"return_position_ids": bool(rng.integers(2)),
               "return_flash_attn_kwargs": bool(rng.integers(2)),
               "return_seq_idx": bool(rng.integers(2))}
    if rng.integers(2):
        options["separator_id"] = int(rng.choice([-100, -1, 0, 7]))
    call = {}
    if rng.integers(3) == 0:
        call["separator_id"] = int(rng.choice([-100, 3]))
    tensors = str(rng.choice(["pt", "np"]))
    positional = bool(rng.integers(2))
    if rng.integers(3) == 0:
        call["return_tensors"] = tensors
        tensors = str(rng.choice(["pt", "np"]))
    return features, options, call, tensors, positional


@pytest.mark.parametrize("seed", range(240))
def test_matches_transformers_on_random_features_and_options(seed):
    features, options, call, tensors, positional = _random_case(np.random.default_rng(seed))
    if positional:
        theirs = transformers.DataCollatorWithFlattening(tensors, **options)
        ours = DataCollatorWithFlattening(tensors, **options)
    else:
        theirs = transformers.DataCollatorWithFlattening(return_tensors=tensors, **options)
        ours = DataCollatorWithFlattening(return_tensors=tensors, **options)
    _assert_same(ours(features, **call), theirs(features, **call))


def test_thd_collator_keeps_its_defaults():
    features = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}]
    _assert_same(ThdCollator()(features),
                 transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)(features))
    _assert_same(DataCollatorWithFlattening()(features),
                 transformers.DataCollatorWithFlattening()(features))


def test_small_example():
    out = ThdCollator()([{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}])
    assert out["input_ids"].tolist() == [[1, 2, 3, 4, 5]]
    assert out["labels"].tolist() == [[-100, 2, 3, -100, 5]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1]]
    assert out["cu_seq_lens_q"].tolist() == [0, 3, 5] and out["max_length_k"] == 3


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


def _tiny_causal_lm():
    """A real transformers causal LM from a config (no download), in float64 so that logits of
    the same token agree to rounding whatever else shares its row."""
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).double().eval()
    with torch.no_grad():  # peaked logits: a wrong target costs visibly more than a right one
        model.lm_head.weight.mul_(40)
    return model


@pytest.mark.parametrize("seed", range(12))
def test_cp_shift_labels_give_the_unsliced_loss_of_a_real_model(seed):
    """Summed over CP ranks, the loss each rank computes from its slice with shift_labels (the
    targets HF's CP training reads, no shift inside the slice) is the loss transformers computes
    on the whole packed batch with its own shift. Each rank's logits are those of the full row at
    its positions (what ring attention computes); the check is on the targets."""
    rng = np.random.default_rng(seed)
    cp = int(rng.choice([2, 3, 4]))
    features = []
    for _ in range(int(rng.integers(1, 6))):
        n = int(rng.integers(1, 40))
        ids = rng.integers(1, 128, n)
        labels = ids.copy()
        labels[:int(rng.integers(0, n))] = -100
        features.append({"input_ids": ids.tolist(), "labels": labels.tolist()})
    model = _tiny_causal_lm()
    vocab = model.config.vocab_size

    with torch.no_grad():
        # The packed row, padded so that CP can slice it (pads: label -100, after each sequence's
        # tokens); the loss transformers computes on it with its own shift is the unsliced loss.
        whole = DataCollatorWithFlattening(pad_to_multiple_of=2 * cp, return_thd_kwargs=True)(features)
        full_logits = model(input_ids=whole["input_ids"], position_ids=whole["position_ids"]).logits
        want = model.loss_function(logits=full_logits, labels=whole["labels"], vocab_size=vocab,
                                   num_items_in_batch=1)
        # Its targets are those of transformers' own collator on the unpadded row.
        hf = transformers.DataCollatorWithFlattening()(features)
        real = torch.from_numpy(np.concatenate(
            [np.arange(a, a + n) for a, n in zip(np.asarray(whole["cu_seqlens_padded"])[:-1],
                                                 np.diff(np.asarray(whole["cu_seqlens"])))]))
        assert torch.equal(whole["labels"][0][real], hf["labels"][0])
        cu = np.asarray(whole["cu_seqlens_padded"])
        got, old_way, seen = 0.0, 0.0, []
        for rank in range(cp):
            part = DataCollatorWithFlattening(cp_size=cp, cp_rank=rank)(features)
            rows = torch.from_numpy(thdpack.cp_global_rows(
                np.asarray(whole["cu_seqlens"]), cu, cp, rank))
            assert torch.equal(part["input_ids"][0], whole["input_ids"][0][rows])
            assert part["shift_labels"].shape == part["labels"].shape
            assert part["shift_labels"].dtype == torch.int64
            slice_logits = full_logits[:, rows]
            got = got + model.loss_function(logits=slice_logits, labels=None, vocab_size=vocab,
                                            shift_labels=part["shift_labels"], num_items_in_batch=1)
            # What a rank trained on before shift_labels: its sliced labels, shifted inside the slice.
            old_way = old_way + model.loss_function(logits=slice_logits, labels=part["labels"],
                                                    vocab_size=vocab, num_items_in_batch=1)
            seen.append(int((part["shift_labels"] != -100).sum()))
    assert sum(seen) == int((hf["labels"][0, 1:] != -100).sum())  # every target on one rank
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.isclose(old_way, want, rtol=1e-4), "the old slicing should have trained wrong"


def test_shift_labels_example():
    # cp=2: one sequence of 8, labels 10..17; chunks of 2, rank 0 keeps chunks 0 and 3.
    features = [{"input_ids": list(range(1, 9)), "labels": list(range(10, 18))}]
    rank0 = DataCollatorWithFlattening(cp_size=2, cp_rank=0)(features)
    assert rank0["input_ids"].tolist() == [[1, 2, 7, 8]]
    assert rank0["labels"].tolist() == [[-100, 11, 16, 17]]
    assert rank0["shift_labels"].tolist() == [[11, 12, 17, -100]]
    assert "shift_labels" not in DataCollatorWithFlattening()(features)
