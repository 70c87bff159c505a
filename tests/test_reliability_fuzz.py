"""More fuzzing of what the entry points read: image and PDF variants for the document loader,
page ranges, and hpd-serve's request parsing. Only the specific error types, ever.

Every fuzz test of the grammar parser (test_grammar.py) and the loader (test_documents.py and
here) runs HPD_FUZZ_EXAMPLES cases (defaults: 2000 per grammar property, 300 per loader test;
at least 10,000 in all, checked below). A longer run, e.g. 100,000 per test (hours):

    HPD_FUZZ_EXAMPLES=100000 python -m pytest -q tests/test_grammar.py tests/test_documents.py \
        tests/test_reliability_fuzz.py -k "fuzz or never_raises or round_trips or spliced or page_bbox"

A failure prints the falsifying example; replay it with `--hypothesis-seed=N`.
"""

from __future__ import annotations

import os

import pymupdf
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tests.test_documents as test_documents
import tests.test_grammar as test_grammar
from hpd_core.documents import DocumentError, parse_page_ranges
from hpd_core.options import ParseOptions
from hpd_tools.server import RequestError, ServeConfig, parse_chat_request
from tests.test_documents import FUZZ, colour_pattern, encode, loads_or_refuses, make_pdf, mutations

SEEDS = {  # small valid files whose mutations reach the decoders' deeper paths
    "jpeg": encode(colour_pattern(), "JPEG", quality=80),
    "tiff (2 frames)": encode(colour_pattern(), "TIFF", save_all=True, append_images=[colour_pattern().convert("L")]),
    "webp": encode(colour_pattern(), "WEBP", lossless=True),
    "bmp": encode(colour_pattern().convert("P"), "BMP"),
    "encrypted pdf": make_pdf(1, 100, 100, encryption=pymupdf.PDF_ENCRYPT_AES_128, user_pw="x", owner_pw="y"),
    "3-page pdf": make_pdf(3, 100, 80, garbage=4, deflate=True),
}


@pytest.mark.parametrize("kind", SEEDS)
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns on corrupt EXIF and TIFF tags
def test_fuzz_mutated_files_raise_only_document_error(kind):
    @FUZZ
    @given(mutations(SEEDS[kind]))
    def check(data):
        loads_or_refuses(data)
    check()


@FUZZ
@given(st.text(alphabet="0123456789-, \u2013allALx.", max_size=20), st.integers(-3, 10**6))
def test_fuzz_page_ranges_raise_only_document_error(spec, count):
    try:
        pages = parse_page_ranges(spec, count)
    except DocumentError:
        return
    assert pages == sorted(set(pages)) and all(1 <= n <= count for n in pages)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=3), max_leaves=8)
CONTRACT_KEYS = ["model", "messages", "temperature", "max_tokens", "stream", "stream_options", "use_mtp",
                 "num_speculative_tokens", "batch_children", "max_active_branches", "max_page_tokens",
                 "repetition_penalty", "max_completion_tokens"]


@FUZZ
@given(st.dictionaries(st.sampled_from(CONTRACT_KEYS), json_values, max_size=6))
def test_fuzz_chat_requests_raise_only_request_error(body):
    try:
        request = parse_chat_request(body, ServeConfig(), ParseOptions())
    except RequestError as err:
        assert 400 <= err.status < 500 and err.message
        return
    assert isinstance(request.options, ParseOptions) and isinstance(request.image_url, str)


def fuzz_counts() -> dict[str, int]:
    """Cases per fuzz test of the grammar parser and the document loader, in this run."""
    counts = {}
    for module in (test_grammar, test_documents):
        for name, test in vars(module).items():
            if name.startswith("test_") and hasattr(test, "hypothesis"):
                counts[name] = test._hypothesis_internal_use_settings.max_examples
    counts |= {f"mutated {kind}": FUZZ.max_examples for kind in SEEDS}
    return counts


def test_the_default_run_fuzzes_grammar_and_loader_with_at_least_10000_cases_and_the_variable_sets_them_all():
    counts = fuzz_counts()
    assert len(counts) >= 13, counts
    if "HPD_FUZZ_EXAMPLES" in os.environ:
        assert set(counts.values()) == {int(os.environ["HPD_FUZZ_EXAMPLES"])}, counts
    else:
        assert sum(counts.values()) >= 10_000, counts
