"""hpd-demo's command line (app.__main__), run in-process on the tiny checkpoint without serving."""

import pytest

import app.__main__ as app_main


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dtype_option_sets_the_engine_dtype_the_compare_verdict_reads(app_checkpoint, monkeypatch, dtype):
    """`--dtype float32` is the token-for-token check a bfloat16 verdict points to."""
    built = []
    monkeypatch.setattr(app_main, "build_demo", lambda engine, *args: built.append(engine))
    monkeypatch.setattr(app_main, "launch", lambda *args, **kwargs: None)
    app_main.main(["--model", str(app_checkpoint), "--dtype", dtype])
    assert [engine.info.dtype for engine in built] == [dtype]
