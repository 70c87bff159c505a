"""hpd-bench end to end on a tiny random checkpoint: one page, k = 2."""

import json

from hpd_tools.bench import MODES, main
from tests.tiny import write_checkpoint


def test_bench_writes_tables_json_and_plots_and_mtp_matches_greedy_in_every_mode(tmp_path, capsys):
    model = write_checkpoint(tmp_path / "ckpt", seed=0, noise=0.5)
    out = tmp_path / "results"
    assert main(["--model", str(model), "--pages", "1", "--font-size", "20", "26", "--ks", "2",
                 "--pages-per-batch", "1,2", "--max-new-tokens", "40", "--out", str(out)]) == 0
    data = json.loads((out / "results.json").read_text())
    cells = {(c["mode"], c["k"]): c for c in data["matrix"]}
    assert set(cells) == {(mode, k) for mode in MODES for k in (0, 2)}
    for mode in MODES:
        off, on = cells[mode, 0], cells[mode, 2]
        assert on["exact"] is True and off["exact"] is None
        assert on["generated_tokens"] == off["generated_tokens"] > 0
        assert on["forwards"] < off["forwards"]
        assert on["tau"] > 1 and len(on["acceptance_by_position"]) == 2
        assert all(0 <= a <= 1 for a in on["acceptance_by_position"])
        assert on["peak_memory_mib"] > 0 and on["wall_seconds"] > 0
    assert cells["fork-batched", 2]["peak_active_branches"] > 1 == cells["fork-serial", 2]["peak_active_branches"]
    assert data["fork_batched_equals_serial"] is True
    sweep = {(c["mode"], c["k"], c["batch"]): c for c in data["sweep"]}
    configs = [("plain", 0), ("fork-batched", 0), ("fork-batched", 6)]  # --sweep-k: 6
    assert set(sweep) == {(mode, k, b) for mode, k in configs for b in (1, 2)}
    assert all(c["exact"] for c in sweep.values())
    assert sweep["plain", 0, 2]["generated_tokens"] == 2 * sweep["plain", 0, 1]["generated_tokens"]
    for mode, k in configs:  # the same page twice: every forward serves both copies
        assert sweep[mode, k, 2]["forwards"] == sweep[mode, k, 1]["forwards"] > 0
    table = (out / "results.md").read_text()
    assert "fork-batched" in table and "torch" in table and "hardware" in table and "**NO**" not in table
    assert "1 synthetic dense pages, font size 20-26 px, seeds 10000000-10000000" in table
    assert table in capsys.readouterr().out
    for name in ("speedup.png", "batching.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG")
