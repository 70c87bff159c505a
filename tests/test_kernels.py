"""The decoder's kernels (hpd_core.model.kernels): compiled by Inductor they equal the eager
reference (float64; on the CPU Inductor writes C++ kernels, on CUDA Triton ones, which
tests/test_graphs.py also checks through the engine's tokens); the rotary rewrite is
transformers' rotate_half to the bit; the engine keeps the eager kernels on the CPU; fused
projections share the checkpoint's memory and write the reference path's tokens."""

import pytest
import torch
from transformers.models.qwen3.modeling_qwen3 import rotate_half

from hpd_core import ParseOptions, load_engine
from hpd_core.model.kernels import EAGER, additive_bias, compiled, fused_attend, fused_when_wide, norm, norm_rotate
from hpd_core.model.language import Rotary
from tests.test_engine_exactness import page
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
