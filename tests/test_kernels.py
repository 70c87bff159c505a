"""The decoder's kernels (hpd_core.model.kernels): compiled by Inductor they equal the eager
reference (float64; on the CPU Inductor writes C++ kernels, on CUDA Triton ones, which
tests/test_graphs.py also checks through the engine's tokens); the rotary rewrite is
transformers' rotate_half to the bit; the engine keeps the eager kernels on the CPU; fused
projections share the checkpoint's memory and write the reference path's tokens; attention that
reads the KV blocks by key counts (`Kernels.paged`) is attention by masks, and the Triton kernel
(CUDA) is its PyTorch contract."""

import os

import pytest
import torch
from transformers.models.qwen3.modeling_qwen3 import rotate_half

from dataclasses import replace

from hpd_core import ParseOptions, load_engine
from hpd_core.graphs import DecodeGraphs
from hpd_core.model.kernels import (EAGER, additive_bias, compiled, fused_attend, fused_when_wide, norm, norm_rotate,
                                    paged_reference)
from hpd_core.model.language import LanguageModel, Rotary
from tests.test_conformance import VOCAB, ours_config, random_model
from tests.test_engine_exactness import page
from tests.test_graphs import pages_with_children
from tests.tiny import write_checkpoint


def decode_arguments(dtype=torch.float64, device: str = "cpu") -> dict[str, tuple]:
    """Each kernel's arguments at decode-like shapes: 3 rows of 2 positions, 4 query and 2 kv
    heads of 16, 8 keys a row, 2 groups of 2 rows (the third row alone)."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(shape, generator=gen, dtype=dtype)

    cos, sin = Rotary(16, 1e6)(torch.tensor([[5, 6], [9, 10], [3, 4]]), dtype)
    mask = torch.rand((3, 1, 4, 8), generator=gen) < 0.5
    mask[..., 0] = True  # every query may attend to some key
    args = {"norm": (rand(3, 2, 64), 1 + 0.1 * rand(64), 1e-6),
            "add_norm": (rand(3, 2, 64), rand(3, 2, 64), 1 + 0.1 * rand(64), 1e-6),
            "norm_rotate": (rand(3, 2, 4, 16), 1 + 0.1 * rand(16), 1e-6, cos, sin),
            "attend": (rand(3, 2, 4, 16), rand(3, 2, 8, 16), rand(3, 2, 8, 16), additive_bias(mask, dtype)),
            "merge": (rand(3, 2, 4, 16), rand(3, 2, 4), rand(2, 2, 8, 16), rand(2, 2, 8), torch.tensor([0, 1, 0]),
                      torch.tensor([0, 0, 1]), torch.tensor([False, False, True])[:, None, None]),
            "silu_mul": (rand(3, 2, 128), rand(3, 2, 128))}
    return {name: tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in values)
            for name, values in args.items()}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="Triton kernels need a GPU (run on the lent H200)"))])
@torch.inference_mode()
def test_inductor_compiled_kernels_equal_the_eager_ones(device):
    fused = compiled()
    for name, args in decode_arguments(device=device).items():
        torch.testing.assert_close(getattr(fused, name)(*args), getattr(EAGER, name)(*args), rtol=1e-12, atol=1e-12,
                                   msg=lambda report, name=name: f"{name}: {report}")


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="the memory-efficient kernel is CUDA's (run on the lent H200)")
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@torch.inference_mode()
def test_fused_attention_gives_the_eager_attention_and_log_sum_exp(dtype, tolerance):
    """Both masks of a decode forward (a row's own keys: per query; a group's shared prefix: one
    row of valid keys for every query), 2 kv heads of 64 queries and 48 keys (3 KV blocks), against
    the eager reference in float64."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float64) for shape in ((3, 2, 64, 64), (3, 2, 48, 64),
                                                                                   (3, 2, 48, 64)))
    own = torch.rand((3, 1, 64, 48), generator=gen) < 0.5
    own[..., 0] = True
    prefix = torch.arange(48) < torch.tensor([48, 40, 1])[:, None]
    for mask in (own, prefix[:, None, None, :]):
        expected = EAGER.attend(q, k, v, additive_bias(mask, torch.float64))
        got = fused_attend(*(t.to("cuda", dtype) for t in (q, k, v)), additive_bias(mask.cuda(), dtype))
        for g, e in zip(got, expected):
            assert g.dtype == dtype
            torch.testing.assert_close(g.double().cpu(), e, rtol=tolerance, atol=tolerance)


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="the memory-efficient kernel is CUDA's (run on the lent H200)")
@torch.inference_mode()
def test_attention_on_cuda_is_the_eager_one_however_wide():
    """`fused_when_wide` over one row's 2,048-key prefix (8 blocks of queries: the compiled
    `attend`) and over 64 groups' (512: the fused kernel), float32, against eager float64."""
    gen = torch.Generator().manual_seed(1)
    choose = fused_when_wide(compiled().attend)
    for groups in (1, 64):
        q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float64)
                   for shape in ((groups, 8, 14, 128), (groups, 8, 2048, 128), (groups, 8, 2048, 128)))
        valid = torch.arange(2048) < torch.randint(1, 2049, (groups, 1), generator=gen)
        expected = EAGER.attend(q, k, v, additive_bias(valid[:, None, None, :], torch.float64))
        got = choose(*(t.to("cuda", torch.float32) for t in (q, k, v)),
                     additive_bias(valid[:, None, None, :].cuda(), torch.float32))
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.double().cpu(), e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_with_a_signed_sin_is_transformers_rotate_half_to_the_bit(dtype):
    x, weight, eps, cos, sin = decode_arguments(dtype)["norm_rotate"]
    normed = norm(x, weight, eps)
    unsigned = torch.cat((-sin[..., :8], sin[..., 8:]), -1)  # the plain sin of the angles
    want = normed * cos + rotate_half(normed) * unsigned
    assert torch.equal(norm_rotate(x, weight, eps, cos, sin), want)


def test_the_engine_keeps_the_eager_kernels_on_the_cpu(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path, 0), device="cpu", fused=True)
    assert engine.model.lm.model.kernels is EAGER


def test_fused_projections_are_views_of_one_matrix_and_give_the_reference_tokens(tmp_path):
    """`fused` runs q, k, v (and gate, up) as one matmul: the checkpoint's tensors become views of
    the joint weight (no second copy, the same state_dict), and every mode writes the tokens of the
    reference path, a matmul per tensor (float64)."""
    folder = write_checkpoint(tmp_path, 3)
    fused, reference = (load_engine(folder, device="cpu", dtype=torch.float64, fused=f) for f in (True, False))
    attention, mlp = fused.model.lm.model.layers[0].self_attn, fused.model.lm.mtp.layers[0].mlp
    assert reference.model.lm.model.layers[0].self_attn.qkv is None
    for joint, parts in ((attention.qkv, (attention.q_proj, attention.k_proj, attention.v_proj)),
                         (mlp.gate_up, (mlp.gate_proj, mlp.up_proj))):
        offsets = [0] + [p.weight.shape[0] for p in parts][:-1]
        assert [p.weight.data_ptr() for p in parts] == [joint[sum(offsets[:i + 1]):].data_ptr()
                                                        for i in range(len(parts))]
    want = reference.model.state_dict()
    got = fused.model.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    image = page(1)
    for options in (ParseOptions(use_mtp=False), ParseOptions(batch_children=True, num_speculative_tokens=4)):
        assert ([b.token_ids for b in fused.parse(image, options).branches]
                == [b.token_ids for b in reference.parse(image, options).branches])


@torch.inference_mode()
def test_attention_by_key_counts_gives_the_hidden_states_of_attention_by_masks():
    """The decoder reading its rows' blocks by key counts (`PagedForward`'s limits, through the
    counts' PyTorch contract) against the masks over gathered keys: prompts (no shared prefix),
    then decode forwards of 1 and 3 positions over two pages with forked children and a row alone,
    unpadded and padded to graph buckets; the same hidden states and keys (float64)."""
    lm: LanguageModel = random_model(ours_config(), seed=4).language_model.double()
    calls = []

    def counted(*args):
        calls.append(args[0].shape)
        return paged_reference(*args)

    for q in (1, 3):
        for graphs in (None, DecodeGraphs(capture=False)):
            runs = []
            for kernels in (EAGER, replace(EAGER, paged=counted)):
                lm.model.kernels, lm.model.graphs = kernels, None
                cache, rows = pages_with_children(lm, 7)
                ids = torch.randint(0, VOCAB, (len(rows), q), generator=torch.Generator().manual_seed(q))
                positions = torch.tensor([[cache.lengths[r] + j for j in range(q)] for r in rows])
                lm.model.graphs = graphs
                runs.append((lm.model(lm.embed(ids), positions, cache, rows), cache))
            lm.model.kernels, lm.model.graphs = EAGER, None
            (want, by_masks), (got, by_counts) = runs
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(by_counts.k, by_masks.k, rtol=1e-12, atol=1e-12)
    prompts = [shape for shape in calls if shape[0] == 1]  # each prompt is a forward of one row
    assert prompts and len(calls) > len(prompts)  # prompts and decode forwards read by counts


def test_a_parse_reading_blocks_by_key_counts_writes_the_reference_tokens(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path, 3), device="cpu", dtype=torch.float64)
    image = page(1)
    for options in (ParseOptions(use_mtp=False), ParseOptions(batch_children=True, num_speculative_tokens=4)):
        want = engine.parse(image, options)
        engine.model.lm.model.kernels = replace(EAGER, paged=paged_reference)
        try:
            got = engine.parse(image, options)
        finally:
            engine.model.lm.model.kernels = EAGER
        assert [b.token_ids for b in got.branches] == [b.token_ids for b in want.branches]


INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's interpreter runs the kernel on the CPU
ON_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run on the lent H200)")


@pytest.mark.skipif(not (torch.cuda.is_available() or INTERPRETED),
                    reason="the paged kernel is Triton's: a GPU, or TRITON_INTERPRET=1 with triton installed")
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), pytest.param(torch.bfloat16, 2e-2, marks=ON_CUDA)])
@pytest.mark.parametrize("splits", [1, 3, pytest.param(0, marks=ON_CUDA)])
@torch.inference_mode()
def test_the_paged_kernel_is_its_pytorch_contract(dtype, tolerance, splits):
    """The Triton kernel against `paged_reference` in float64: rows over shuffled blocks of a pool,
    ragged key counts (from 1 to all of a row's keys), query counts below, at and above one
    program's 16, head sizes of the bundled model and the real one, the keys in one program a row,
    split among 3, or split as the GPU's multiprocessors ask (0). The interpreter's bf16 `tl.dot`
    is wrong even for a bare product, so it checks float32 only (bench/NOTES.md)."""
    from bench.paged_kernel import case
    from hpd_core.model.paged import paged_attend
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(0)
    for rows, heads, queries, keys, dim in ((1, 2, 3, 40, 64), (3, 2, 17, 100, 64), (5, 8, 14, 300, 128),
                                            (2, 8, 64, 2000, 128)):
        q, pool_k, pool_v, table, limit = case(rows, heads, queries, keys, dim, gen)
        expected = paged_reference(q, pool_k, pool_v, table, limit)
        got = paged_attend(*(t.to(device, dtype) for t in (q, pool_k, pool_v)), table.to(device), limit.to(device),
                           splits=splits)
        for g, e in zip(got, expected):
            assert g.dtype == dtype
            torch.testing.assert_close(g.double().cpu(), e, rtol=tolerance, atol=tolerance)
