import torch

from bench.host_layout import forked_pages, host_ops


def test_a_graph_steps_host_work_is_counted_and_the_same_at_any_number_of_rows():
    work = {}
    for pages in (1, 4):
        cache, rows = forked_pages(pages, children=3, prompt=40)
        work[pages] = host_ops(cache, rows, torch.tensor([[cache.lengths[r]] for r in rows]))
    assert work[1] == work[4]  # planned for all rows at once, not row by row
    assert work[1].layout > 0 and work[1].padding > 0 and work[1].made > 0
    assert work[1].packing == 2  # prefix_valid to int64, one cat: the nine tensors in one buffer


def test_a_decode_forwards_kernels_are_counted_by_the_function_that_launches_them():
    from bench.layer_ops import count
    counter, layers = count(batch=4, q=1)
    # every kernel function of the gathered path runs in every layer, each launching kernels of its own
    for name in ("add_norm", "norm_rotate", "attend", "merge", "silu_mul"):
        assert counter.calls[name] >= layers and counter.ops[name] > 0, name
    assert counter.ops["layer"] > 0  # the projections and the KV writes and gathers
    assert "paged" not in counter.calls  # the paged kernel is CUDA's: not in the eager functions
