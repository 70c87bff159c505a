"""The vLLM backend (hpd_vllm) against the in-process engine, on the bundled model in float32.

Needs the `[vllm]` extra (scripts/test.sh installs it): these tests import vllm and are never skipped.
"""

import importlib.metadata
import os
import subprocess
import threading

import httpx
import pytest
import torch
from PIL import Image
from playwright.sync_api import expect

from hpd_core import BranchFinished, BranchForked, PageFinished, PageStarted, ParseOptions, TokensAppended
from hpd_core import load_engine as load_hpd_engine
from app.ui import build_demo
from hpd_tools import cli
from hpd_tools.server import create_app, replicas, serving
from hpd_training.synth import SynthConfig, render_page
from hpd_vllm import VLLMFolders
from hpd_vllm import load_engine as load_vllm_engine
from hpd_vllm.loader import converted
from hpd_vllm.remote import server_command, wait_ready
from tests.conftest import free_port, serve
from tests.test_app_browser import browser, open_app, parse, set_checked, set_value, upload  # noqa: F401
from tests.test_app_documents import downloaded, set_pages, three_page_pdf
from tests.test_server import body, data_url

BUDGET = 48  # tokens per branch: most children of these pages end sooner, the layout branch is cut
MODES = {"plain": dict(prompt="plain"), "fork-serial": dict(prompt="fork"),
         "fork-batched": dict(prompt="fork", batch_children=True)}
DRAFTS = 3


@pytest.fixture(scope="module")
def pages():
    return [render_page(seed, SynthConfig()).image for seed in (3, 11, 20)]


@pytest.fixture(scope="module")
def ours():
    return load_hpd_engine(None, dtype=torch.float32)


@pytest.fixture(scope="module")
def vllm_cache(tmp_path_factory):
    """$HPD_VLLM_CACHE for this module: the bundled model is converted once."""
    cache = tmp_path_factory.mktemp("hpd-vllm")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HPD_VLLM_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="module")
def theirs(vllm_cache):
    return load_vllm_engine(None, dtype=torch.float32)


@pytest.fixture(scope="module")
def expected(ours, pages):
    """mode -> the in-process engine's events per page, computed on first use: MTP off and serial,
    whose tokens, forks and ends are those of every mode of the same prompt
    (tests/test_engine_exactness.py)."""
    cache = {}

    def events(mode: str) -> list[list]:
        prompt = MODES[mode]["prompt"]
        if prompt not in cache:
            cache[prompt] = [list(ours.stream(page, options(prompt if prompt == "plain" else "fork-serial", False)))
                             for page in pages]
        return cache[prompt]
    return events


def options(mode: str, use_mtp: bool) -> ParseOptions:
    return ParseOptions(**MODES[mode], use_mtp=use_mtp, num_speculative_tokens=DRAFTS, draft_confidence=0.0,
                        max_new_tokens=BUDGET)


def metric(engine, drafts: int, name: str):
    """A counter of the engine's vLLM `LLM` for `drafts`. vLLM's Prometheus registry holds the
    counters of the last `LLM` made in a process, so that must be this one."""
    assert list(engine.llms)[-1] == drafts, "the counters read are another LLM's"
    for m in engine.llm(drafts).get_metrics():
        if m.name == name:
            return m.value
    raise KeyError(name)


def branches(result):
    return [(b.branch, b.label, b.bbox, b.position, b.token_ids, b.text, b.finish_reason) for b in result.branches]


def events_by_branch(events):
    """Per branch: its tokens from the TokensAppended events, its fork and its end."""
    out = {}
    for e in events:
        if isinstance(e, TokensAppended):
            out.setdefault(e.branch, {}).setdefault("tokens", []).extend(e.token_ids)
        elif isinstance(e, BranchForked):
            out.setdefault(e.branch, {})["forked"] = (e.position, e.label, e.bbox)
        elif isinstance(e, BranchFinished):
            out.setdefault(e.branch, {})["finished"] = (e.reason, e.tokens)
    return out


def assert_same_decoding(got: list, reference: list, mode: str) -> None:
    """One page's events on the vLLM backend against the in-process engine's: the same prompt,
    branches, tokens, forks, ends, text, blocks and Markdown."""
    a, b = reference[-1].result, got[-1].result
    assert isinstance(got[0], PageStarted) and isinstance(got[-1], PageFinished)
    assert (got[0].prompt_tokens, got[0].tiles, got[0].image_size) == \
           (reference[0].prompt_tokens, reference[0].tiles, reference[0].image_size)
    assert branches(b) == branches(a)
    assert (b.text, b.blocks, b.markdown, b.cancelled) == (a.text, a.blocks, a.markdown, False)
    assert events_by_branch(got) == events_by_branch(reference)
    assert (b.stats.parent_tokens, b.stats.child_tokens, b.stats.forked_branches) == \
           (a.stats.parent_tokens, a.stats.child_tokens, a.stats.forked_branches)
    assert b.stats.forked_branches >= (0 if mode == "plain" else 1)


@pytest.mark.parametrize("use_mtp", [False, True], ids=["greedy", "p-mtp"])
@pytest.mark.parametrize("mode", list(MODES))
def test_vllm_emits_the_in_process_engines_tokens_in_every_mode(theirs, pages, expected, mode, use_mtp):
    opts = options(mode, use_mtp)
    for page, reference in zip(pages, expected(mode)):
        assert_same_decoding(list(theirs.stream(page, opts)), reference, mode)


def test_children_reuse_the_page_prompt_from_vllms_prefix_cache(theirs, pages):
    llm = theirs.llm(DRAFTS)
    block = llm.llm_engine.vllm_config.cache_config.block_size
    for page in pages:
        llm.reset_prefix_cache()
        hits = metric(theirs, DRAFTS, "vllm:prefix_cache_hits")
        result = theirs.parse(page, options("fork-batched", True))
        children = result.stats.forked_branches
        assert children >= 1
        # vLLM's own counter: the layout request starts on an empty cache, and the stats report
        # exactly the children's hits: each at least the page prompt's full blocks but the last
        # (vLLM's EAGLE path recomputes the last matched block)
        assert metric(theirs, DRAFTS, "vllm:prefix_cache_hits") - hits == result.stats.shared_prefix_tokens
        assert result.stats.shared_prefix_tokens >= children * (result.stats.prompt_tokens // block - 1) * block


def test_p_mtp_in_vllm_accepts_the_drafts_the_in_process_head_accepts(ours, theirs, pages):
    """Token by token, a draft is accepted in vLLM where it is in our engine, but for a branch's last
    step: vLLM's first token comes from the prefill, so its steps end one token later than ours, and
    it does not return drafts accepted past a stop token (its counters include them)."""
    opts = options("fork-batched", True)
    names = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens")
    for page in pages:
        before = [metric(theirs, DRAFTS, n) for n in names]
        mine = theirs.parse(page, opts)
        steps, drafted, accepted = (metric(theirs, DRAFTS, n) - b for n, b in zip(names, before))
        assert (mine.stats.branch_steps, mine.stats.drafted_tokens) == (steps, drafted) == (steps, DRAFTS * steps)
        assert 0 < mine.stats.accepted_tokens <= accepted
        reference = ours.parse(page, opts)
        for a, b in zip(reference.branches, mine.branches, strict=True):
            end = max(len(a.drafted) - (DRAFTS + 1), 0)
            assert b.drafted[:end] == a.drafted[:end]
        assert abs(accepted - reference.stats.accepted_tokens) <= DRAFTS * len(reference.branches)


def test_cancelling_ends_every_branch_cancelled(theirs, pages):
    cancel = threading.Event()
    cancel.set()
    [result] = theirs.parse_batch([pages[0]], options("fork-batched", True), cancel)
    assert result.cancelled and result.branches == ()
    cancel = threading.Event()
    events = []
    for event in theirs.stream(pages[0], options("fork-batched", True), cancel):
        events.append(event)
        if isinstance(event, BranchForked):
            cancel.set()
    result = events[-1].result
    assert result.cancelled
    assert "cancelled" in {b.finish_reason for b in result.branches}
    assert all(b.finish_reason for b in result.branches)


def error_of(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("page", [None, "page.png", Image.new("RGB", (0, 10))], ids=["none", "path", "empty"])
def test_bad_pages_get_the_in_process_engines_errors(ours, theirs, page):
    assert error_of(lambda: list(theirs.stream(page))) == error_of(lambda: list(ours.stream(page)))


def test_p_mtp_without_a_head_gets_the_in_process_engines_error(ours, theirs, pages):
    headless = type(theirs)(ours, VLLMFolders(theirs.folders.lm, None))
    assert not headless.info.mtp
    ours_headless = load_hpd_engine(None, dtype=torch.float32)
    ours_headless.model.language_model.mtp = None
    expected = error_of(lambda: ours_headless.parse(pages[0], ParseOptions(use_mtp=True)))
    assert error_of(lambda: headless.parse(pages[0], ParseOptions(use_mtp=True))) == expected


def test_the_hpd_vllm_plugin_registers_the_p_mtp_draft_architecture():
    [plugin] = [e for e in importlib.metadata.entry_points(group="vllm.general_plugins") if e.name == "hpd"]
    plugin.load()()
    from vllm import ModelRegistry
    assert "EagleHPDParsingMTP" in ModelRegistry.get_supported_archs()


# ---- the front doors on the vLLM backend. Last in this file: the CLI makes an `LLM` of its own, and
# vLLM's counters (`metric`) are the newest `LLM`'s.

FRONT_DOOR = ["--batch-children", "--max-new-tokens", "30", "-k", str(DRAFTS)]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return three_page_pdf(tmp_path_factory.mktemp("document"))


def hpd_parse(pdf, out, *flags: str) -> str:
    """hpd-parse's document Markdown of `pdf` on the bundled model with `flags`."""
    assert cli.main([str(pdf), "-o", str(out), *flags]) == cli.EXIT_OK
    return (out / f"{pdf.stem}.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def vllm_app(theirs):
    with serve(build_demo(theirs)) as url:
        yield url


def test_the_app_on_the_vllm_backend_parses_a_document_into_hpd_parse_s_markdown(browser, vllm_app,  # noqa: F811
                                                                                  document, tmp_path):
    for page in open_app(browser, vllm_app):
        expect(page.locator("#engine-info")).to_contain_text("on vLLM")
        upload(page, document)
        set_pages(page, "all")
        set_value(page, "#max-new-tokens input", 30)
        set_value(page, "#num-speculative-tokens input[type=number]", DRAFTS)
        set_checked(page, "batch-children", True)
        parse(page)
        expect(page.locator("#status")).to_contain_text(f"Parsed 3 pages of {document.name}")
        expect(page.locator("#tree tbody tr").nth(1)).to_be_attached()  # the last page's tree: it forked
        got = downloaded(page, "#download-md")
        assert got == hpd_parse(document, tmp_path, *FRONT_DOOR)  # the in-process engine's
        assert got.count(cli.PAGE_SEPARATOR) == 2


def test_hpd_serve_on_the_vllm_backend_answers_as_on_the_in_process_engine(ours, theirs, pages):
    request = body(data_url(pages[1]), max_tokens=200, num_speculative_tokens=DRAFTS)
    answers = []
    for engine in (theirs, ours):
        with serving(create_app(replicas(engine, 2))) as base:
            reply = httpx.post(base + "/chat/completions", json=request, timeout=600)
            assert reply.status_code == 200, reply.text
            answers.append(reply.json()["choices"][0]["message"]["content"])
    assert answers[0] == answers[1] and answers[0].strip()


def test_hpd_parse_on_the_vllm_backend_writes_the_in_process_engines_markdown(vllm_cache, document, tmp_path):
    flags = [*FRONT_DOOR, "--pages", "2-3"]  # the app's test above decodes all three
    got = hpd_parse(document, tmp_path / "vllm", "--backend", "vllm", *flags)
    assert got == hpd_parse(document, tmp_path / "hpd", *flags)
    assert got.count(cli.PAGE_SEPARATOR) == 1



def test_vllm_args_reach_vllm_and_a_misspelt_one_is_a_usage_error(vllm_cache, document, tmp_path, capsys):
    engine = load_vllm_engine(None, dtype=torch.float32, max_num_seqs=7)
    assert engine.llm(0).llm_engine.vllm_config.scheduler_config.max_num_seqs == 7
    out = tmp_path / "out"
    code = cli.main([str(document), "-o", str(out), "--backend", "vllm", "--vllm-arg", "max_num_seqz=7"])
    assert code == cli.EXIT_USAGE and not out.exists()
    assert "not an argument of vllm.LLM: max_num_seqz" in capsys.readouterr().err
    assert cli.main([str(document), "-o", str(out), "--vllm-arg", "max_num_seqs=7"]) == cli.EXIT_USAGE
    assert "--vllm-arg needs --backend vllm" in capsys.readouterr().err



def test_vllm_arguments_on_cuda_fix_the_kv_cache_unless_the_caller_sizes_it(monkeypatch):
    from types import SimpleNamespace
    from hpd_vllm.backend import llm_arguments
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=8 * 2**30))
    cuda = torch.device("cuda")
    assert llm_arguments(cuda, {}) == {"enforce_eager": False, "gpu_memory_utilization": 0.3,
                                       "async_scheduling": False, "kv_cache_memory_bytes": 2 * 2**30}
    assert llm_arguments(cuda, {"gpu_memory_utilization": 0.5}) == {"enforce_eager": False, "async_scheduling": False,
                                                                    "gpu_memory_utilization": 0.5}
    assert llm_arguments(torch.device("cpu"), {"max_num_seqs": 4}) == {"enforce_eager": True, "max_num_seqs": 4}


def test_p_mtp_is_refused_where_vllm_writes_wrong_pages_with_it_and_allowed_in_process_elsewhere():
    from hpd_vllm.backend import mtp_refusal
    assert mtp_refusal(False, torch.device("cpu"), {}) is None
    assert mtp_refusal(False, torch.device("cuda"), {}) is None  # synchronous by default (llm_arguments)
    assert mtp_refusal(False, torch.device("cuda"), {"async_scheduling": False}) is None
    assert "async_scheduling" in mtp_refusal(False, torch.device("cuda"), {"async_scheduling": True})
    assert "through a vLLM server" in mtp_refusal(True, torch.device("cpu"), {})


# ---- a `vllm serve` process running the language model (hpd_vllm/remote.py) -------------------

@pytest.fixture(scope="module")
def vllm_server(vllm_cache, tmp_path_factory):
    """The URL of a `vllm serve` process of the converted bundled model (remote.server_command)."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    command = [*server_command(converted(None).lm, port, dtype="float32"), "--enforce-eager", "--max-model-len", "8192"]
    with open(log, "w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_ready(url, server, 900)  # about a minute on a quiet 2-core CPU
        except (RuntimeError, TimeoutError) as err:
            pytest.fail(f"{err}: {log.read_text()[-3000:]}")
        yield url + "/v1"
    finally:
        server.terminate()
        server.wait(120)


def prefix_cache_hits(url: str) -> float:
    """The server's Prometheus counter of prefix-cache hits (tokens)."""
    text = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=30).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:prefix_cache_hits_total"))


@pytest.fixture(scope="module")
def remote(vllm_server):
    return load_vllm_engine(None, dtype=torch.float32, server=vllm_server)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_vllm_server_emits_the_in_process_engines_tokens(remote, vllm_server, pages, expected, mode):
    for page, reference in zip(pages[:2], expected(mode)):  # two of the three pages: CI time
        hits = prefix_cache_hits(vllm_server)
        got = list(remote.stream(page, options(mode, False)))
        assert_same_decoding(got, reference, mode)
        # the children's prefix-cache hits, as the server reports them per request: each child takes
        # most of its page prompt from the cache (1,664-1,792 of 1,779 tokens measured); the server's
        # counter also has the layout request's (a repeated page's prompt, e.g. in an earlier test)
        stats = got[-1].result.stats
        assert prefix_cache_hits(vllm_server) - hits >= stats.shared_prefix_tokens
        assert stats.shared_prefix_tokens >= stats.forked_branches * stats.prompt_tokens // 2


def test_a_vllm_server_refuses_p_mtp_and_an_absent_server_is_named(remote, pages):
    with pytest.raises(ValueError, match="use_mtp is not available through a vLLM server"):
        remote.parse(pages[0], ParseOptions(use_mtp=True))
    assert not remote.info.mtp and "vLLM server at http://127.0.0.1:" in remote.info.name
    with pytest.raises(ConnectionError, match="no vLLM server answers at http://127.0.0.1:9/v1"):
        load_vllm_engine(None, dtype=torch.float32, server="http://127.0.0.1:9/v1")


def test_hpd_parse_with_a_vllm_server_writes_the_in_process_engines_markdown(vllm_server, document, tmp_path):
    flags = [*FRONT_DOOR, "--pages", "2", "--no-mtp"]
    got = hpd_parse(document, tmp_path / "served", "--backend", "vllm", "--vllm-server", vllm_server, *flags)
    assert got == hpd_parse(document, tmp_path / "hpd", *flags)
