"""hpd-parse, run in-process through `main(argv)` on a tiny random checkpoint."""

import json
import os
import signal
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from hpd_tools import cli
from hpd_tools.cli import PAGE_SEPARATOR, main, name_documents
from hpd_tools.files import safe_name
from hpd_core.events import TokensAppended
from tests.tiny import write_checkpoint


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return str(write_checkpoint(tmp_path_factory.mktemp("ckpt"), seed=0, noise=0.5))


@pytest.fixture
def folder(tmp_path) -> Path:
    """report.pdf (2 pages), `scan` (a PNG without extension), broken.pdf, notes.txt."""
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    pdf = pymupdf.open()
    for i in range(2):
        pdf.new_page(width=200, height=260).insert_text((20, 40), f"Page {i + 1}", fontsize=14)
    pdf.save(root / "report.pdf")
    pixels = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(root / "sub" / "scan", format="PNG")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    (root / "notes.txt").write_text("not a document")
    return root


def parse(model, *args) -> int:
    return main([*map(str, args), "--model", model, "--max-new-tokens", "24"])


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_good_documents_are_written_and_the_bad_one_reported(model, folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert parse(model, folder, "-o", out) == 1
    assert files(out) == {"report.md", "report/page-0001.md", "report/page-0001.json", "report/page-0002.md",
                          "report/page-0002.json", "scan.md", "scan/page-0001.md", "scan/page-0001.json"}
    page = json.loads((out / "report" / "page-0002.json").read_text())
    assert page["page"] == 2 and page["source"].endswith("report.pdf")
    assert page["stats"]["generated_tokens"] > 0 and page["blocks"]
    assert (out / "report.md").read_text().count(PAGE_SEPARATOR) == 1
    err = capsys.readouterr().err
    failures = [line for line in err.splitlines() if "failed:" in line]
    assert len(failures) == 1 and "broken.pdf" in failures[0] and "not a readable PDF" in failures[0]
    assert "notes.txt" not in err
    assert "3/3" in err and "tok/s" in err  # the progress bar
    assert "2 files ok, 1 failed; 3 pages parsed" in err


def test_pages_selects_pages_of_each_document(model, folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert parse(model, folder / "report.pdf", "-o", out, "--pages", "2-") == 0
    assert files(out) == {"report.md", "report/page-0002.md", "report/page-0002.json"}
    assert PAGE_SEPARATOR not in (out / "report.md").read_text()
    assert parse(model, folder / "report.pdf", "-o", out, "--pages", "1,3-9") == 0  # past the end: dropped
    assert "report/page-0001.md" in files(out)
    assert parse(model, folder / "report.pdf", "-o", out, "--pages", "3") == 1
    assert "selects none" in capsys.readouterr().err


def test_second_run_skips_written_pages_and_overwrite_redoes_them(model, folder, tmp_path, capsys):
    out, pdf = tmp_path / "out", folder / "report.pdf"
    assert parse(model, pdf, "-o", out) == 0
    pages = sorted((out / "report").iterdir())
    for p in pages:
        os.utime(p, ns=(0, 0))
    assert parse(model, pdf, "-o", out) == 0
    assert "0 pages parsed, 2 already done" in capsys.readouterr().err
    assert all(p.stat().st_mtime_ns == 0 for p in pages)
    (out / "report" / "page-0002.json").unlink()  # a page with a missing file is parsed again
    assert parse(model, pdf, "-o", out) == 0
    assert "1 page parsed, 1 already done" in capsys.readouterr().err
    assert (out / "report" / "page-0001.json").stat().st_mtime_ns == 0
    assert parse(model, pdf, "-o", out, "--overwrite") == 0
    assert all(p.stat().st_mtime_ns > 0 for p in pages)


class CtrlCOnSecondPage:
    """An engine that presses Ctrl-C as soon as its second page has produced tokens."""

    def __init__(self, engine):
        self.engine, self.pages = engine, 0

    @property
    def info(self):
        return self.engine.info

    def stream(self, page, options, cancel):
        self.pages += 1
        for event in self.engine.stream(page, options, cancel):
            if self.pages == 2 and isinstance(event, TokensAppended) and not cancel.is_set():
                os.kill(os.getpid(), signal.SIGINT)
            yield event


def test_ctrl_c_stops_the_page_keeps_written_pages_and_exits_130(model, folder, tmp_path, monkeypatch, capsys):
    load = cli.engine_of
    monkeypatch.setattr(cli, "engine_of", lambda *a: CtrlCOnSecondPage(load(*a)))
    out, handler = tmp_path / "out", signal.getsignal(signal.SIGINT)
    assert parse(model, folder / "report.pdf", folder / "sub", "-o", out) == 130
    assert files(out) == {"report/page-0001.md", "report/page-0001.json"}  # no half files, no temp files
    assert "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is handler


def test_usage_errors_exit_2(model, folder, tmp_path, capsys):
    out = tmp_path / "out"
    no_mtp = str(write_checkpoint(tmp_path / "no-mtp", seed=0, noise=0.5, mtp_folder=tmp_path / "mtp-elsewhere"))
    assert parse(model, folder, "-o", out, "--pages", "3-1") == 2
    assert parse(model, folder, "-o", out, "--max-active-branches", "0") == 2
    assert main([str(folder), "-o", str(out), "--model", str(tmp_path / "nowhere")]) == 2
    assert "no model folder" in capsys.readouterr().err
    assert main([str(folder), "-o", str(out), "--model", no_mtp]) == 2
    assert "offers no P-MTP drafts (no head" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert parse(model, folder, "-o", tmp_path / "file") == 2
    with pytest.raises(SystemExit) as exit_:
        main([str(folder)])  # no -o
    assert exit_.value.code == 2
    assert not out.exists()


def test_missing_input_is_reported_and_the_rest_continue(model, folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert parse(model, tmp_path / "missing.pdf", folder / "sub" / "scan", "-o", out) == 1
    assert "missing.pdf' does not exist" in capsys.readouterr().err
    assert "scan/page-0001.md" in files(out)


def test_output_names_are_safe_and_distinct(tmp_path):
    paths = [Path("a/report.pdf"), Path("b/report.pdf"), Path("c/Report.png"), Path("../x/..evil name?.pdf")]
    names = [d.name for d in name_documents(paths)]
    assert len({n.lower() for n in names}) == len(paths)
    assert names[2] == "Report_png" and names[3] == "evil_name"
    assert all(n and "/" not in n and "." not in n for n in names)
    assert safe_name("../../etc/passwd") == "etc_passwd" and safe_name("...") == "document"
