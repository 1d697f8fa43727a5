"""The plain-torch BERT forward behind the fast path's torch backend: transformers' ``BertModel``
hidden states on the packaged model (padded batches, long and empty texts), and ``None`` — so
transformers loads the model — for anything but a plain BERT encoder with safetensors weights."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from embedcheck.encode import model as enc

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def folder():
    try:
        resolved = enc.resolve_model(enc.DEFAULT_MODEL)
    except Exception as e:  # pragma: no cover - the packaged model is a test dependency
        pytest.skip(f"packaged model not installed: {e}")
    return resolved.folder


def test_bert_forward_gives_transformers_hidden_states_on_padded_batches(folder):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    from embedcheck.encode import torch_bert

    ours = torch_bert.load(folder)
    assert ours is not None
    ref = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    texts = ["a", "", "The cat sat on the mat.", "word " * 400, "Ünïcödé — 数学 and émojis 🙂 " * 3]
    encs = tok.encode_batch(texts)
    ids = torch.tensor([e.ids for e in encs])
    mask = torch.tensor([e.attention_mask for e in encs])
    types = torch.tensor([e.type_ids for e in encs])
    with torch.inference_mode():
        got = ours(ids, mask, types)
        want = ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    keep = mask.bool()
    assert got.shape == want.shape
    assert float((got[keep] - want[keep]).abs().max()) < 1e-5  # every real token's state
    assert torch.isfinite(got).all()  # padding queries too: finite, so a masked mean stays finite


@pytest.mark.parametrize("change", [
    {"model_type": "roberta"},
    {"position_embedding_type": "relative_key"},
    {"hidden_act": "gelu_new"},
    {"is_decoder": True},
])
def test_anything_but_a_plain_bert_encoder_is_left_to_transformers(folder, tmp_path, change):
    from embedcheck.encode import torch_bert

    copy = tmp_path / "m"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, **change}))
    assert torch_bert.load(copy) is None


def test_missing_or_mismatched_weights_are_left_to_transformers(folder, tmp_path):
    pytest.importorskip("torch")
    from safetensors.numpy import load_file, save_file

    from embedcheck.encode import torch_bert

    copy = tmp_path / "m"
    shutil.copytree(folder, copy)
    tensors = load_file(str(copy / "model.safetensors"))
    del tensors[next(k for k in tensors if k.endswith("encoder.layer.0.attention.self.query.weight"))]
    save_file(tensors, str(copy / "model.safetensors"))
    assert torch_bert.load(copy) is None
    (copy / "model.safetensors").unlink()
    assert torch_bert.load(copy) is None
    assert torch_bert.load(tmp_path / "nowhere") is None


def test_old_layernorm_names_gamma_beta_are_read(folder, tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file, save_file

    from embedcheck.encode import torch_bert

    copy = tmp_path / "m"
    shutil.copytree(folder, copy)
    tensors = load_file(str(copy / "model.safetensors"))
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
               for k, v in tensors.items()}
    save_file(renamed, str(copy / "model.safetensors"))
    a, b = torch_bert.load(folder), torch_bert.load(copy)
    ids = torch.tensor([[101, 7592, 2088, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    with torch.inference_mode():
        assert np.array_equal(a(ids, mask).numpy(), b(ids, mask).numpy())
