"""Checkpoint folders: round trips, P-MTP placement, clear errors, hub repo ids (docs/format.md §2)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hpd_core import load_engine
from hpd_core.checkpoint import CheckpointError, load_model, save_model
from hpd_core.config import HPDConfig
from hpd_core.loader import ModelNotFound
from hpd_core.model import HPDModel
from hpd_core.speculative import draft
from hpd_core.tokenizer import TokenizerError
from tests.tiny import byte_tokenizer, random_like, tiny_config, write_checkpoint


def random_model(seed: int = 0, **llm) -> HPDModel:
    gen = torch.Generator().manual_seed(seed)
    model = HPDModel(tiny_config(byte_tokenizer(), **llm))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(random_like(name, p, gen))
    return model.eval()


def same_state(a: HPDModel, b: HPDModel) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("tied", [False, True])
def test_single_file_round_trip_is_exact(tmp_path, tied):
    model = random_model(tie_word_embeddings=tied)
    save_model(model, tmp_path, dtype=torch.float32)
    assert (tmp_path / "model.safetensors").is_file() and not (tmp_path / "model.safetensors.index.json").exists()
    loaded = load_model(tmp_path)
    assert same_state(model, loaded) and loaded.has_mtp
    lm = loaded.language_model
    assert (lm.lm_head.weight is lm.model.embed_tokens.weight) == tied


def test_bf16_round_trip_rounds_each_weight_once(tmp_path):
    model = random_model()
    save_model(model, tmp_path)  # default dtype: bf16
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    loaded = load_model(tmp_path, dtype=torch.float32)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value.bfloat16().float()), name


def test_sharded_round_trip_keeps_every_shard_under_the_limit(tmp_path):
    model = random_model()
    limit = 100_000  # the largest tiny tensor (embed_tokens, lm_head) is 67,840 B
    save_model(model, tmp_path, dtype=torch.float32, shard_bytes=limit)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 3 and not (tmp_path / "model.safetensors").exists()
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == shards
    total = 0
    for shard in shards:
        tensors = load_file(str(tmp_path / shard))
        nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
        assert nbytes <= limit
        assert all(index["weight_map"][k] == shard for k in tensors)
        total += nbytes
    assert index["metadata"]["total_size"] == total
    assert set(index["weight_map"]) == set(model.state_dict())
    assert same_state(model, load_model(tmp_path))


def test_saving_again_removes_stale_shards(tmp_path):
    model = random_model()
    save_model(model, tmp_path, dtype=torch.float32, shard_bytes=100_000)
    save_model(model, tmp_path, dtype=torch.float32)
    assert [p.name for p in tmp_path.glob("*.safetensors")] == ["model.safetensors"]
    assert not (tmp_path / "model.safetensors.index.json").exists()
    assert same_state(model, load_model(tmp_path))


def test_mtp_head_embedded_or_in_a_p_mtp_folder_gives_the_same_drafts(tmp_path):
    embedded = load_model(write_checkpoint(tmp_path / "a", seed=3))
    apart_dir = write_checkpoint(tmp_path / "b", seed=3, mtp_folder=tmp_path / "b" / "P-MTP")
    with safe_open(str(apart_dir / "model.safetensors"), "pt") as f:
        assert not any(k.startswith("language_model.mtp.") for k in f.keys())
    with safe_open(str(apart_dir / "P-MTP" / "model.safetensors"), "pt") as f:
        assert {"language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
                "language_model.mtp.fc.weight"} <= set(f.keys())
    apart = load_model(apart_dir)
    assert embedded.has_mtp and apart.has_mtp and same_state(embedded, apart)
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, embedded.config.llm_config.hidden_size, generator=gen)
    pending = torch.randint(0, 256, (4,), generator=gen)
    with torch.no_grad():
        assert torch.equal(draft(embedded.lm, hidden, pending, 6), draft(apart.lm, hidden, pending, 6))


def test_p_mtp_tensors_named_mtp_star_load_too(tmp_path):
    folder = write_checkpoint(tmp_path / "c", seed=3, mtp_folder=tmp_path / "c" / "P-MTP")
    mtp_file = folder / "P-MTP" / "model.safetensors"
    renamed = {k.replace("language_model.mtp.", "mtp."): v for k, v in load_file(str(mtp_file)).items()}
    save_file(renamed, str(mtp_file))
    reference = load_model(write_checkpoint(tmp_path / "d", seed=3))
    assert same_state(load_model(folder), reference)


def test_without_mtp_tensors_the_model_has_no_head(tmp_path):
    folder = write_checkpoint(tmp_path, seed=1, mtp_folder=tmp_path / "P-MTP")
    shutil.rmtree(folder / "P-MTP")
    assert not load_model(folder).has_mtp


def edit_tensors(folder, edit) -> None:
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path))


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.pop("vision_model.encoder.layers.1.attn.qkv.weight"),
     r"missing tensors \(1\): vision_model\.encoder\.layers\.1\.attn\.qkv\.weight"),
    (lambda t: t.update({"vision_model.encoder.layers.2.ls1": torch.ones(32)}),
     r"unexpected tensors \(1\): vision_model\.encoder\.layers\.2\.ls1"),
    (lambda t: t.update({"language_model.model.layers.0.self_attn.k_proj.weight": torch.zeros(64, 32)}),
     r"mis-shaped tensors \(1\): language_model\.model\.layers\.0\.self_attn\.k_proj\.weight: "
     r"file \(64, 32\), model \(32, 64\)"),
])
def test_tensor_mismatches_name_the_tensor(tmp_path, edit, message):
    folder = write_checkpoint(tmp_path, seed=0)
    edit_tensors(folder, edit)
    with pytest.raises(CheckpointError, match=message):
        load_model(folder)


def test_missing_weights_file_is_a_checkpoint_error(tmp_path):
    folder = write_checkpoint(tmp_path, seed=0)
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        load_engine(folder)


def test_fork_id_in_config_that_disagrees_with_tokenizer_is_a_tokenizer_error(tmp_path):
    folder = write_checkpoint(tmp_path, seed=0)
    config = json.loads((folder / "config.json").read_text())
    right = config["fork_token_id"]
    config["fork_token_id"] = right + 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(TokenizerError, match=rf"<FORK> is id {right} in tokenizer.json but {right + 1} in config.json"):
        load_engine(folder)


# ---- Hugging Face repo ids, offline from a hub cache -----------------------------------------

REVISION = "91de80054c23ab4238e3d7073fa2b83c2a7e301e"


def fill_hub_cache(cache, repo_id: str, checkpoint) -> None:
    """huggingface_hub's cache layout: models--org--name/{blobs/<sha256>, snapshots/<rev>/<file> -> blob,
    refs/main = <rev>}."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REVISION)
    (repo / "blobs").mkdir()
    for src in sorted(p for p in checkpoint.rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(src.read_bytes()).hexdigest()
        shutil.copyfile(src, blob)
        link = repo / "snapshots" / REVISION / src.relative_to(checkpoint)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """An empty hub cache in tmp_path, offline. huggingface_hub reads HF_HOME, HF_HUB_CACHE and
    HF_HUB_OFFLINE into `huggingface_hub.constants` at import time, so set both env and constants."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    for name, value in (("HF_HOME", str(tmp_path / "hf")), ("HF_HUB_CACHE", str(cache)), ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)  # a repo id must not be mistaken for a relative path
    return cache


def test_hub_repo_id_loads_offline_from_the_cache(tmp_path, offline_hub):
    source = write_checkpoint(tmp_path / "src", seed=2, mtp_folder=tmp_path / "src" / "P-MTP")
    fill_hub_cache(offline_hub, "hpd-test/tiny-hpd", source)
    engine = load_engine("hpd-test/tiny-hpd", device="cpu")
    assert engine.info.path == str(offline_hub / "models--hpd-test--tiny-hpd" / "snapshots" / REVISION)
    assert engine.info.mtp
    assert same_state(engine.model, load_model(source))


def test_unknown_hub_repo_offline_is_model_not_found(offline_hub):
    with pytest.raises(ModelNotFound, match="hpd-test/absent"):
        load_engine("hpd-test/absent", device="cpu")


def test_bundled_models_load_by_name_with_their_heads_and_render_resolution(tmp_path, monkeypatch):
    from hpd_core.loader import BUNDLED, bundled_name, resolve_model
    from hpd_core.documents import DEFAULT_DPI
    assert resolve_model(None) == resolve_model("hpd-tiny") == BUNDLED["hpd-tiny"]
    docs = load_engine("hpd-tiny-docs", device="cpu")
    assert docs.info.name == "bundled hpd-tiny-docs" and docs.info.mtp and docs.info.render_dpi == 150
    assert docs.model.config.max_dynamic_patch == 20 and bundled_name(docs.info.path) == "hpd-tiny-docs"
    assert HPDConfig.load(BUNDLED["hpd-tiny"][0] / "config.json").render_dpi is None  # DEFAULT_DPI
    assert "render_dpi" not in HPDConfig().to_dict()  # the real checkpoint's config stays as it was
    assert HPDConfig.from_dict(docs.model.config.to_dict()).render_dpi == 150
    assert load_engine(None, device="cpu").info.render_dpi == DEFAULT_DPI
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hpd-tiny").mkdir()  # a folder of that name here wins over the bundled name
    assert resolve_model("hpd-tiny") == (Path("hpd-tiny"), None)
    with pytest.raises(ModelNotFound, match="no model folder at hpd-tiny-doc"):
        resolve_model("hpd-tiny-doc")


def test_vision_bf16_changes_only_the_image_rows_and_is_reported(app_checkpoint):
    from PIL import Image

    page = Image.new("RGB", (300, 400), "white")
    exact, fast = load_engine(app_checkpoint, vision_bf16=False), load_engine(app_checkpoint, vision_bf16=True)
    ids, e32, _ = exact.prompt(page)
    _, e16, _ = fast.prompt(page)
    image = torch.tensor(ids) == exact.special.image_context
    assert e16.dtype == e32.dtype == torch.float32
    assert torch.equal(e16[~image], e32[~image])                     # text embeddings: untouched
    assert not torch.equal(e16[image], e32[image])                   # the vision tower ran in bf16 ...
    assert torch.allclose(e16[image], e32[image], rtol=0.05, atol=0.05)  # ... to bf16 precision
    assert (fast.info.vision_dtype, exact.info.vision_dtype) == ("bfloat16", "")
    assert exact.prompt(page)[1].equal(e32)                          # fp32 vision is deterministic
