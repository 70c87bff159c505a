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
