"""Our model agrees with code we did not write (docs/format.md §4, §6).

- the Qwen3 decoder with transformers' `Qwen3ForCausalLM`, full forward and through our KV cache;
- vision tower + pixel shuffle + mlp1 with transformers' InternVL (vision tower, pixel shuffle,
  multi-modal projector), and the whole image+text forward with `InternVLForConditionalGeneration`;
- vision with an independent loop/einsum reference of §6 written here;
- the prompt's token ids with the §4 string, written out here.

Weights are random (tests/tiny.py `random_like`: norms near 1, layer scales near 0.5) and mapped
to transformers' names. Relative error is ‖ours − theirs‖ / ‖theirs‖.
"""

import dataclasses
import math
import re

import pytest
import torch
from PIL import Image
from transformers import (InternVLConfig, InternVLForConditionalGeneration, InternVLVisionConfig, Qwen3Config,
                          Qwen3ForCausalLM)

from hpd_core.config import HPDConfig, LLMConfig, VisionConfig
from hpd_core.engine import Engine
from hpd_core.kv_cache import KVCache
from hpd_core.model import HPDModel
from hpd_core.model.vision import attention, blockwise_attention
from hpd_core.preprocess import grid_for
from hpd_core.tokenizer import HPDTokenizer
from tests.tiny import byte_tokenizer, random_like, tiny_config

VOCAB = 97


def rel_err(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.double() - theirs.double()).norm() / theirs.double().norm())


def llm_config(tied: bool) -> LLMConfig:
    # GQA 6/2 and head_dim 12 != hidden/heads (40/6 is not even an integer).
    return LLMConfig(vocab_size=VOCAB, hidden_size=40, intermediate_size=72, num_hidden_layers=3,
                     num_attention_heads=6, num_key_value_heads=2, head_dim=12, max_position_embeddings=512,
                     rope_theta=1e6, tie_word_embeddings=tied)


def vision_config() -> VisionConfig:
    # 8x8 patches per tile -> 4x4 = 16 LM rows per tile, so the pixel-shuffle order matters.
    return VisionConfig(hidden_size=24, intermediate_size=56, num_hidden_layers=2, num_attention_heads=3,
                        image_size=112, patch_size=14)


def random_model(cfg: HPDConfig, seed: int) -> HPDModel:
    gen = torch.Generator().manual_seed(seed)
    model = HPDModel(cfg, with_mtp=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(random_like(name, p, gen))
    return model.eval()


def ours_config(tied: bool = False, downsample_ratio: float = 0.5) -> HPDConfig:
    """`downsample_ratio` 0.5: 2x2 shuffle (the real model), 16 LM rows a tile; 0.25: 4x4 (the
    bundled model's), 4 rows a tile of 16 patches each."""
    return HPDConfig(vision_config=vision_config(), llm_config=llm_config(tied), force_image_size=112,
                     downsample_ratio=downsample_ratio, fork_token_id=VOCAB - 2, child_token_id=VOCAB - 1, eos_token_id=VOCAB - 3, pad_token_id=0)


def qwen3_config(llm: LLMConfig) -> Qwen3Config:
    return Qwen3Config(vocab_size=llm.vocab_size, hidden_size=llm.hidden_size,
                       intermediate_size=llm.intermediate_size, num_hidden_layers=llm.num_hidden_layers,
                       num_attention_heads=llm.num_attention_heads, num_key_value_heads=llm.num_key_value_heads,
                       head_dim=llm.head_dim, max_position_embeddings=llm.max_position_embeddings,
                       rms_norm_eps=llm.rms_norm_eps, tie_word_embeddings=llm.tie_word_embeddings,
                       rope_parameters={"rope_type": "default", "rope_theta": llm.rope_theta},
                       attn_implementation="eager")


def internvl_config(cfg: HPDConfig, image_token_id: int) -> InternVLConfig:
    v = cfg.vision_config
    vision = InternVLVisionConfig(hidden_size=v.hidden_size, intermediate_size=v.intermediate_size,
                                  num_hidden_layers=v.num_hidden_layers, num_attention_heads=v.num_attention_heads,
                                  image_size=v.image_size, patch_size=v.patch_size, layer_norm_eps=v.layer_norm_eps,
                                  attention_bias=v.qkv_bias, use_qk_norm=False, norm_type="layer_norm",
                                  use_mean_pooling=True, hidden_act="gelu")
    return InternVLConfig(vision_config=vision, text_config=qwen3_config(cfg.llm_config).to_dict(),
                          image_token_id=image_token_id, downsample_ratio=cfg.downsample_ratio,
                          projector_hidden_act="gelu", vision_feature_layer=-1,
                          vision_feature_select_strategy="default",
                          tie_word_embeddings=cfg.llm_config.tie_word_embeddings, attn_implementation="eager")


LM_NAMES = [(r"^language_model\.model\.", "model."), (r"^language_model\.lm_head\.", "lm_head.")]
VISION_NAMES = [
    (r"^vision_model\.embeddings\.patch_embedding\.", "vision_tower.embeddings.patch_embeddings.projection."),
    (r"^vision_model\.embeddings\.class_embedding$", "vision_tower.embeddings.cls_token"),
    (r"^vision_model\.embeddings\.position_embedding$", "vision_tower.embeddings.position_embeddings"),
    (r"^vision_model\.encoder\.layers\.(\d+)\.norm1\.", r"vision_tower.encoder.layer.\1.layernorm_before."),
    (r"^vision_model\.encoder\.layers\.(\d+)\.norm2\.", r"vision_tower.encoder.layer.\1.layernorm_after."),
    (r"^vision_model\.encoder\.layers\.(\d+)\.attn\.proj\.", r"vision_tower.encoder.layer.\1.attention.projection_layer."),
    (r"^vision_model\.encoder\.layers\.(\d+)\.mlp\.", r"vision_tower.encoder.layer.\1.mlp."),
    (r"^vision_model\.encoder\.layers\.(\d+)\.ls1$", r"vision_tower.encoder.layer.\1.lambda_1"),
    (r"^vision_model\.encoder\.layers\.(\d+)\.ls2$", r"vision_tower.encoder.layer.\1.lambda_2"),
    (r"^mlp1\.0\.", "multi_modal_projector.layer_norm."),
    (r"^mlp1\.1\.", "multi_modal_projector.linear_1."),
    (r"^mlp1\.3\.", "multi_modal_projector.linear_2."),
]


def rename(name: str, rules) -> str | None:
    for pattern, repl in rules:
        if re.search(pattern, name):
            return re.sub(pattern, repl, name)
    return None


def to_transformers_lm(model: HPDModel) -> dict[str, torch.Tensor]:
    state = {rename(k, LM_NAMES): v for k, v in model.state_dict().items() if k.startswith("language_model.")}
    if model.config.llm_config.tie_word_embeddings:
        state.pop("lm_head.weight")
    return state


def to_transformers_internvl(model: HPDModel) -> dict[str, torch.Tensor]:
    """Our state dict in InternVLForConditionalGeneration's names (fused qkv split into q, k, v)."""
    state = {}
    for k, v in model.state_dict().items():
        qkv = re.match(r"^vision_model\.encoder\.layers\.(\d+)\.attn\.qkv\.(weight|bias)$", k)
        if qkv:
            for part, chunk in zip("qkv", v.chunk(3, dim=0)):  # rows: q, then k, then v
                state[f"model.vision_tower.encoder.layer.{qkv[1]}.attention.{part}_proj.{qkv[2]}"] = chunk
        elif k.startswith("language_model.lm_head."):
            if not model.config.llm_config.tie_word_embeddings:
                state["lm_head.weight"] = v
        elif k.startswith("language_model.model."):
            state["model.language_model." + k.removeprefix("language_model.model.")] = v
        else:
            state["model." + rename(k, VISION_NAMES)] = v
    return state


def load_exactly(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    missing, unexpected = module.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(module.config, "tie_word_embeddings", False) else set()
    assert set(missing) <= tied and not unexpected, (missing, unexpected)


def random_pixels(tiles: int, size: int, seed: int) -> torch.Tensor:
    return torch.randn(tiles, 3, size, size, generator=torch.Generator().manual_seed(seed))


# ---- Qwen3 decoder vs transformers -----------------------------------------------------------

@pytest.mark.parametrize("tied", [False, True])
def test_decoder_logits_match_transformers_qwen3(tied):
    model = random_model(ours_config(tied), seed=1)
    theirs = Qwen3ForCausalLM(qwen3_config(model.config.llm_config)).eval()
    load_exactly(theirs, to_transformers_lm(model))
    ids = torch.randint(0, VOCAB, (2, 37), generator=torch.Generator().manual_seed(2))
    lm = model.language_model
    with torch.no_grad():
        expected = theirs(input_ids=ids).logits
        got = lm.logits(lm.model(lm.embed(ids), torch.arange(ids.shape[1])[None].expand(2, -1)))
    assert got.shape == expected.shape
    assert rel_err(got, expected) <= 1e-5


def test_untied_head_is_used_and_tied_head_is_the_embedding():
    untied, tied = random_model(ours_config(False), 1).language_model, random_model(ours_config(True), 1).language_model
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    assert not torch.equal(untied.lm_head.weight, untied.model.embed_tokens.weight)


def test_kv_cache_decoding_matches_the_full_forward():
    """Two rows of different lengths: prefill 5 and 9 tokens, then 3 tokens per step at each row's
    own positions; every step's logits equal the full causal forward's at those positions."""
    lm = random_model(ours_config(), seed=3).language_model
    llm = lm.config
    ids = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        full = lm.logits(lm.model(lm.embed(ids), torch.arange(30)[None].expand(2, -1)))
        cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=torch.float32,
                        block_size=4, blocks=2)  # a small pool: the cache must grow while decoding
        rows = [cache.alloc(), cache.alloc()]
        for row, seq, n in zip(rows, ids, (5, 9)):
            h = lm.model(lm.embed(seq[:n])[None], torch.arange(n)[None], cache, [row])
            cache.crop(row, n)
            assert rel_err(lm.logits(h)[0], full[row, :n]) <= 1e-5
        starts = torch.tensor([5, 9])
        while int(starts.max()) + 3 <= 30:
            positions = starts[:, None] + torch.arange(3)
            got = lm.logits(lm.model(lm.embed(ids.gather(1, positions)), positions, cache, rows))
            assert rel_err(got, full.gather(1, positions[..., None].expand(-1, -1, VOCAB))) <= 1e-5
            starts += 3
            for row, start in zip(rows, starts.tolist()):
                cache.crop(row, start)


# ---- vision vs transformers' InternVL ------------------------------------------------------

def internvl_for(model: HPDModel, image_token_id: int) -> InternVLForConditionalGeneration:
    theirs = InternVLForConditionalGeneration(internvl_config(model.config, image_token_id)).eval()
    load_exactly(theirs, to_transformers_internvl(model))
    return theirs


@pytest.mark.parametrize("ratio", [0.5, 0.25])
def test_image_rows_match_transformers_internvl(ratio):
    model = random_model(ours_config(downsample_ratio=ratio), seed=5)
    theirs = internvl_for(model, image_token_id=VOCAB - 4)
    pixels = random_pixels(3, 112, seed=6)
    with torch.no_grad():
        expected = theirs.model.get_image_features(pixel_values=pixels).pooler_output  # [T, rows, H]
        got = model.encode_images(pixels, chunk=2)
    assert expected.shape == (3, model.config.tokens_per_tile, 40)
    assert rel_err(got, expected.reshape(-1, 40)) <= 1e-5


@pytest.mark.parametrize("ratio", [0.5, 0.25])
def test_image_and_text_logits_match_transformers_internvl(ratio):
    """The whole §6 forward: image rows replace the <IMG_CONTEXT> run, then the LM."""
    model = random_model(ours_config(downsample_ratio=ratio), seed=7)
    image_id = VOCAB - 4
    theirs = internvl_for(model, image_token_id=image_id)
    pixels = random_pixels(2, 112, seed=8)
    text = torch.randint(0, VOCAB - 4, (20,), generator=torch.Generator().manual_seed(9))
    ids = torch.cat([text[:7], torch.full((2 * model.config.tokens_per_tile,), image_id), text[7:]])
    lm = model.language_model
    with torch.no_grad():
        expected = theirs(input_ids=ids[None], pixel_values=pixels).logits[0]
        embeds = model.embed_prompt(ids, model.encode_images(pixels), image_id)
        got = lm.logits(lm.model(embeds[None], torch.arange(ids.numel())[None]))[0]
    assert rel_err(got, expected) <= 1e-5


# ---- vision vs an independent reference of §6 ------------------------------------------------

def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def reference_image_rows(state: dict[str, torch.Tensor], cfg: HPDConfig, pixels: torch.Tensor) -> torch.Tensor:
    """docs/format.md §6 written out: conv patches, CLS, pos-emb, pre-norm blocks with layer scale,
    drop CLS, s x s pixel shuffle, LN(1e-5) -> Linear -> GELU -> Linear."""
    v = cfg.vision_config
    p, g, d, heads = v.patch_size, v.grid, v.hidden_size, v.num_attention_heads

    def s(name: str) -> torch.Tensor:
        return state[name].double()

    t = pixels.shape[0]
    x = pixels.double().reshape(t, 3, g, p, g, p)  # [t, c, row, py, col, px]
    e = "vision_model.embeddings."
    patches = torch.einsum("tcipjq,dcpq->tijd", x, s(e + "patch_embedding.weight")) + s(e + "patch_embedding.bias")
    h = torch.cat([s(e + "class_embedding").expand(t, 1, d), patches.reshape(t, g * g, d)], 1)
    h = h + s(e + "position_embedding")
    for i in range(v.num_hidden_layers):
        n = f"vision_model.encoder.layers.{i}."
        a = layer_norm(h, s(n + "norm1.weight"), s(n + "norm1.bias"), v.layer_norm_eps)
        qkv = a @ s(n + "attn.qkv.weight").T + s(n + "attn.qkv.bias")
        q, k, val = (m.reshape(t, -1, heads, d // heads) for m in qkv.split(d, -1))
        weights = torch.softmax(torch.einsum("tqhe,tkhe->thqk", q, k) / math.sqrt(d // heads), -1)
        attn = torch.einsum("thqk,tkhe->tqhe", weights, val).reshape(t, -1, d)
        h = h + s(n + "ls1") * (attn @ s(n + "attn.proj.weight").T + s(n + "attn.proj.bias"))
        a = layer_norm(h, s(n + "norm2.weight"), s(n + "norm2.bias"), v.layer_norm_eps)
        f = gelu_erf(a @ s(n + "mlp.fc1.weight").T + s(n + "mlp.fc1.bias"))
        h = h + s(n + "ls2") * (f @ s(n + "mlp.fc2.weight").T + s(n + "mlp.fc2.bias"))
    grid = h[:, 1:].reshape(t, g, g, d)  # [t, patch row, patch col, d]
    # Each LM row: the s x s patch block at (s r, s c), its patches' channels row-major (for 2x2:
    # TL, TR, BL, BR); blocks row-major.
    sc = cfg.shuffle_scale
    rows = [torch.cat([grid[ti, sc * r + i, sc * c + j] for i in range(sc) for j in range(sc)])
            for ti in range(t) for r in range(g // sc) for c in range(g // sc)]
    m = torch.stack(rows)
    m = layer_norm(m, s("mlp1.0.weight"), s("mlp1.0.bias"), 1e-5)
    m = gelu_erf(m @ s("mlp1.1.weight").T + s("mlp1.1.bias"))
    return m @ s("mlp1.3.weight").T + s("mlp1.3.bias")


@pytest.mark.parametrize("ratio", [0.5, 0.25])
def test_image_rows_match_an_independent_reference_of_the_spec(ratio):
    model = random_model(ours_config(downsample_ratio=ratio), seed=10)
    pixels = random_pixels(3, 112, seed=11)
    expected = reference_image_rows(model.state_dict(), model.config, pixels)
    with torch.no_grad():
        got32 = model.encode_images(pixels)
        got64 = model.double().encode_images(pixels.double())
    assert rel_err(got64, expected) <= 1e-12
    assert rel_err(got32, expected) <= 1e-5


def test_blockwise_attention_is_attention():
    """The vision tower's CPU bf16 attention: exact in float64 (queries not a multiple of the
    block, heads in steps of two), and in bf16 within a few bf16 roundings of the exact result,
    like PyTorch's kernel."""
    q, k, v = (torch.randn(2, 3, 37, 16, generator=torch.Generator().manual_seed(i), dtype=torch.float64)
               for i in range(3))
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert rel_err(blockwise_attention(q, k, v, block=8, scores=2 * 8 * 37), exact) <= 1e-14
    low = [t.bfloat16() for t in (q, k, v)]
    fused = rel_err(torch.nn.functional.scaled_dot_product_attention(*low), exact)
    ours = attention(*low)  # blockwise: bf16 on the CPU
    assert ours.dtype == torch.bfloat16 and rel_err(ours, exact) <= max(4 * fused, 2 ** -7)
    trained = [t.clone().requires_grad_() for t in low]  # training takes the fused kernel
    attention(*trained).float().sum().backward()
    assert all(t.grad is not None for t in trained)


# ---- the prompt of §4 ------------------------------------------------------------------------

SYSTEM = ("你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的"
          "多模态大语言模型。")
SPECIAL = re.compile(r"(<\|im_start\|>|<\|im_end\|>|<img>|</img>|<IMG_CONTEXT>)")


def spec_prompt(instruction: str, image_tokens: int) -> str:
    return ("<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\n<img>"
            + "<IMG_CONTEXT>" * image_tokens + "</img>\n" + instruction + "<|im_end|>\n<|im_start|>assistant\n")


def spec_ids(tok, text: str) -> list[int]:
    """Each special token one id; every other piece one id per UTF-8 byte."""
    ids = []
    for piece in filter(None, SPECIAL.split(text)):
        if SPECIAL.fullmatch(piece):
            ids.append(tok.token_to_id(piece))
        else:
            piece_ids = tok.encode(piece, add_special_tokens=False).ids
            assert len(piece_ids) == len(piece.encode("utf-8"))
            ids += piece_ids
    return ids


@pytest.mark.parametrize("prompt,instruction", [("fork", "document parsing with fork."),
                                                ("plain", "document parsing.")])
def test_prompt_tokens_follow_the_spec(prompt, instruction):
    """A 896x1344 page at the real tile size: 2x3 grid + thumbnail = 7 tiles, 256 rows each."""
    tok = byte_tokenizer()
    small = tiny_config(tok)
    vision = dataclasses.replace(small.vision_config, image_size=448, num_hidden_layers=1, extra={})
    cfg = dataclasses.replace(small, vision_config=vision, force_image_size=448, max_dynamic_patch=24, extra={})
    engine = Engine(random_model(cfg, seed=12), HPDTokenizer(tok, cfg))
    page = Image.new("RGB", (896, 1344), "white")
    assert grid_for(page.size, cfg) == (2, 3)
    ids, embeds, tiles = engine.prompt(page, prompt)
    assert tiles == 7 and cfg.tokens_per_tile == 256
    assert tok.decode(ids, skip_special_tokens=False) == spec_prompt(instruction, 256 * 7)
    assert ids == spec_ids(tok, spec_prompt(instruction, 256 * 7))
    assert ids.count(tok.token_to_id("<IMG_CONTEXT>")) == 256 * 7
    assert embeds.shape == (len(ids), cfg.llm_config.hidden_size)
