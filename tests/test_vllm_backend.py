"""The vLLM backend (hpd_vllm) against the in-process engine, on the bundled model in float32.

Needs the `[vllm]` extra (scripts/test.sh installs it): these tests import vllm and are never skipped.
"""

import importlib.metadata
import threading

import pytest
import torch
from PIL import Image

from hpd_core import BranchFinished, BranchForked, PageFinished, PageStarted, ParseOptions, TokensAppended
from hpd_core import load_engine as load_hpd_engine
from hpd_training.synth import SynthConfig, render_page
from hpd_vllm import VLLMFolders
from hpd_vllm import load_engine as load_vllm_engine

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
def theirs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hpd-vllm")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HPD_VLLM_CACHE", str(cache))
        engine = load_vllm_engine(None, dtype=torch.float32)
        yield engine


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


@pytest.mark.parametrize("use_mtp", [False, True], ids=["greedy", "p-mtp"])
@pytest.mark.parametrize("mode", list(MODES))
def test_vllm_emits_the_in_process_engines_tokens_in_every_mode(theirs, pages, expected, mode, use_mtp):
    opts = options(mode, use_mtp)
    for page, reference in zip(pages, expected(mode)):
        got = list(theirs.stream(page, opts))
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
