"""`HPDModel(HPDConfig())` expects exactly the real checkpoint's tensors (docs/format.md §2).

Built on the meta device: no weights are written. The file size of the real `model.safetensors`
(2,143,907,448 B) is predicted from names and shapes alone: a safetensors file is an 8-byte
length, a JSON header (padded with spaces to 8 bytes) and the tensor data. Our predictor is
checked against the safetensors writer on a tiny model first.

Worked out: the real tensors in bf16 are 2,143,825,920 B (1,071,912,960 parameters: vision
304,012,288, mlp1 5,253,120, LM 751,110,144 with an untied lm_head, P-MTP head 11,537,408), and
the header our names give with metadata {"format": "pt"} is 81,528 B: 2,143,907,448 B, the real
size to the byte. Tied, the file would lack lm_head (310,642,688 B); without the embedded P-MTP
head, 23,074,816 B; neither fits. (§2's "2,143,983,616 B untied" is 157,696 B too high.)
"""

import json

import torch

from bench.real_dims import REAL_SPECIALS, real_tokenizer, write_real_checkpoint
from hpd_core.checkpoint import save_model
from hpd_core.config import HPDConfig
from hpd_core.model import HPDModel
from hpd_core.tokenizer import HPDTokenizer
from tests.tiny import byte_tokenizer, tiny_config

REAL_FILE_BYTES = 2_143_907_448
REAL_MTP_BUNDLE_TENSOR_BYTES = 644_360_192  # embed_tokens + lm_head + P-MTP head (§2)


def spec_tensors() -> dict[str, tuple[int, ...]]:
    """The tensors of docs/format.md §2, written out from the spec ([out, in])."""
    d, inter, vocab, lm_inter, head_dim = 1024, 4096, 151681, 3072, 128
    out = {"vision_model.embeddings.patch_embedding.weight": (d, 3, 14, 14),
           "vision_model.embeddings.patch_embedding.bias": (d,),
           "vision_model.embeddings.class_embedding": (1, 1, d),
           "vision_model.embeddings.position_embedding": (1, 1025, d)}
    for i in range(24):
        p = f"vision_model.encoder.layers.{i}."
        for name, rows, cols in (("attn.qkv", 3 * d, d), ("attn.proj", d, d), ("mlp.fc1", inter, d),
                                 ("mlp.fc2", d, inter)):
            out[p + name + ".weight"], out[p + name + ".bias"] = (rows, cols), (rows,)
        for name in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "ls1", "ls2"):
            out[p + name] = (d,)
    out.update({"mlp1.0.weight": (4 * d,), "mlp1.0.bias": (4 * d,), "mlp1.1.weight": (d, 4 * d),
                "mlp1.1.bias": (d,), "mlp1.3.weight": (d, d), "mlp1.3.bias": (d,)})
    lm = "language_model.model."
    out[lm + "embed_tokens.weight"] = (vocab, d)
    for i in range(28):
        p = f"{lm}layers.{i}."
        out.update({p + "self_attn.q_proj.weight": (16 * head_dim, d), p + "self_attn.k_proj.weight": (8 * head_dim, d),
                    p + "self_attn.v_proj.weight": (8 * head_dim, d), p + "self_attn.o_proj.weight": (d, 16 * head_dim),
                    p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,),
                    p + "mlp.gate_proj.weight": (lm_inter, d), p + "mlp.up_proj.weight": (lm_inter, d),
                    p + "mlp.down_proj.weight": (d, lm_inter), p + "input_layernorm.weight": (d,),
                    p + "post_attention_layernorm.weight": (d,)})
    out[lm + "norm.weight"] = (d,)
    out["language_model.lm_head.weight"] = (vocab, d)
    mtp = "language_model.mtp."
    out.update({mtp + "fc.weight": (d, 2 * d), mtp + "pre_fc_norm_hidden.weight": (d,),
                mtp + "pre_fc_norm_embedding.weight": (d,), mtp + "layers.0.mlp.gate_proj.weight": (lm_inter, d),
                mtp + "layers.0.mlp.up_proj.weight": (lm_inter, d), mtp + "layers.0.mlp.down_proj.weight": (d, lm_inter),
                mtp + "norm.weight": (d,)})
    return out


def real_shapes() -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        model = HPDModel(HPDConfig())
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def safetensors_size(shapes: dict[str, tuple[int, ...]], itemsize: int = 2, dtype: str = "BF16",
                     metadata: dict | None = None) -> int:
    """Bytes of a safetensors file of these tensors (names sorted, all one dtype)."""
    header, offset = ({"__metadata__": metadata} if metadata else {}), 0
    for name in sorted(shapes):
        size = itemsize * torch.Size(shapes[name]).numel()
        header[name] = {"dtype": dtype, "shape": list(shapes[name]), "data_offsets": [offset, offset + size]}
        offset += size
    text = len(json.dumps(header, separators=(",", ":")).encode())
    return 8 + text + (-text) % 8 + offset


def test_model_expects_exactly_the_spec_tensors():
    shapes = real_shapes()
    assert len(shapes) == 664
    assert shapes == spec_tensors()


def test_key_shapes_of_the_real_model():
    s = real_shapes()
    assert s["vision_model.encoder.layers.0.attn.qkv.weight"] == (3072, 1024)
    assert s["vision_model.embeddings.position_embedding"] == (1, 1025, 1024)
    assert s["mlp1.1.weight"] == (1024, 4096)
    assert s["language_model.model.layers.27.self_attn.q_proj.weight"] == (2048, 1024)
    assert s["language_model.lm_head.weight"] == (151681, 1024)
    assert s["language_model.mtp.fc.weight"] == (1024, 2048)


def test_size_predictor_matches_the_safetensors_writer(tmp_path):
    model = HPDModel(tiny_config(byte_tokenizer()))
    save_model(model, tmp_path)  # bf16, metadata {"format": "pt"}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert (tmp_path / "model.safetensors").stat().st_size == safetensors_size(shapes, metadata={"format": "pt"})


def test_real_names_and_shapes_give_the_real_file_size_to_the_byte():
    shapes = real_shapes()
    tensor_bytes = 2 * sum(torch.Size(s).numel() for s in shapes.values())
    assert tensor_bytes == 2_143_825_920
    assert safetensors_size(shapes, metadata={"format": "pt"}) == REAL_FILE_BYTES
    tied = {k: v for k, v in shapes.items() if k != "language_model.lm_head.weight"}
    no_mtp = {k: v for k, v in shapes.items() if not k.startswith("language_model.mtp.")}
    assert REAL_FILE_BYTES - safetensors_size(tied, metadata={"format": "pt"}) > 300_000_000
    assert REAL_FILE_BYTES - safetensors_size(no_mtp, metadata={"format": "pt"}) > 20_000_000


def test_p_mtp_bundle_tensors_match_the_spec_size():
    shapes = real_shapes()
    bundle = [s for k, s in shapes.items() if k.startswith("language_model.mtp.")
              or k in ("language_model.model.embed_tokens.weight", "language_model.lm_head.weight")]
    assert 2 * sum(torch.Size(s).numel() for s in bundle) == REAL_MTP_BUNDLE_TENSOR_BYTES


def test_bench_tokenizer_has_the_real_vocab_and_special_ids():
    tok = real_tokenizer()
    assert tok.get_vocab_size() == 151681
    assert {i: tok.id_to_token(i) for i in REAL_SPECIALS} == REAL_SPECIALS
    special = HPDTokenizer(tok, HPDConfig()).special
    assert (special.im_start, special.im_end, special.image_context, special.fork, special.child) == (
        151644, 151645, 151671, 151679, 151680)
    assert tok.encode("<img><IMG_CONTEXT></img>", add_special_tokens=False).ids == [151669, 151671, 151670]


def test_the_random_checkpoint_refuses_a_folder_that_holds_another_checkpoint(tmp_path):
    shard = tmp_path / "model-00001-of-00002.safetensors"
    shard.write_bytes(b"weights")
    try:
        write_real_checkpoint(tmp_path)
    except SystemExit as refused:
        assert "other files" in str(refused)
    else:
        raise AssertionError("wrote over another checkpoint's folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == [shard.name] and shard.read_bytes() == b"weights"
