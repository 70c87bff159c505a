"""The Gradio app: `build_demo(engine)` lays out the page and wires small handlers; `launch`.

Parse tab: a document page, a range or all pages are decoded in a background job (app.job, in
batches) while a generator handler renders the view of the page being decoded a few times a
second: the branch tree, branch outputs with accepted drafts, tokens/s, boxes on the page, the
timeline, progress over pages; then Markdown, JSON, a navigator over the finished pages and the
document's downloads (hpd-parse's document Markdown and page records).
Compare tab: the same page decoded twice (MTP off/on, serial/batched children, plain/fork).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import gradio as gr

from app.boxes import image_uri, page_html
from app.cache import sweep_leftovers
from app.comparison import MODES, Comparison, variant_options
from app.downloads import write_downloads
from app.examples import examples
from app.job import JOIN_SECONDS, ParseJob
from app.latex import LATEX, katex_markdown
from app.selection import SELECT_JS, block_of_branch, marked_markdown
from app.render import (CSS, branches_html, comparison_html, diff_html, info_markdown, label_legend, stats_html,
                        status_html, tree_html)
from app.timeline import sparkline_svg, timeline_svg
from hpd_core.documents import (DEFAULT_DPI, DocumentError, Limits, Page, PasswordRequired, count_pages,
                                display_name, iter_pages, load_pages, parse_page_ranges)
from hpd_core.engine import Engine
from hpd_core.loader import bundled_name
from hpd_core.options import ParseOptions
from hpd_tools.forms import OptionSpec, option_specs

FILE_TYPES = [".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp"]
SPARKLINE = (720, 64)     # width, height of the Parse tab's tokens/s chart (a wide, low strip)
SLOW_FRAME_SECONDS = 1.0  # the timeline and the page boxes redraw at most this often while decoding
CACHE_SECONDS = 3600     # uploads and the result files Gradio serves are deleted this long after they were made
MAX_RUNS = 16            # sessions whose last run is kept (for Stop); the oldest are dropped first
FOLLOW = -1              # the page navigator's value for "follow the page being decoded"


class Document(NamedTuple):
    file: gr.File
    page: gr.Slider
    dpi: gr.Slider
    password: gr.Textbox
    pages: gr.Textbox        # the pages to parse ("1-3,7", "all"); empty: the page of the slider


class ParsePanel(NamedTuple):
    status: gr.HTML
    navigator: gr.Radio      # the document's finished pages; picking one shows it
    stats: gr.HTML
    sparkline: gr.HTML
    tree: gr.HTML
    branches: gr.HTML
    timeline: gr.HTML
    page: gr.HTML
    legend: gr.HTML
    markdown: gr.Markdown
    raw: gr.Code
    json: gr.JSON
    download_md: gr.DownloadButton
    download_json: gr.DownloadButton


class Buttons(NamedTuple):
    parse: gr.Button
    stop: gr.Button
    compare_mode: gr.Radio
    compare: gr.Button
    compare_stop: gr.Button


class Side(NamedTuple):
    title: gr.Markdown
    stats: gr.HTML
    sparkline: gr.HTML
    timeline: gr.HTML


class ComparePanel(NamedTuple):
    status: gr.HTML
    a: Side
    b: Side
    summary: gr.HTML
    diff: gr.HTML


@dataclass(frozen=True)
class Selection:
    """The pages a parse asked for: their numbers, and the pages themselves, rendered as they are taken."""
    source: str                  # the document's file name
    numbers: tuple[int, ...]     # ascending
    pages: Iterator[Page]


@dataclass
class Run:
    """A job plus what the UI needs to present it. Page indices count the selected pages from 0."""
    job: ParseJob
    source: str
    numbers: tuple[int, ...]     # the selected page numbers
    number: int                  # runs of this demo, counted from 1
    uris: dict[int, str] = field(default_factory=dict)  # page index -> its image as a data URI, encoded once
    pinned: int | None = None    # the page picked in the navigator; None: follow the page being decoded
    drawn: int | None = None     # the page the live view is drawing
    listed: list = field(default_factory=list)  # the navigator's choices as last sent
    shown_boxes: tuple = ()      # (label, bbox) of the boxes drawn on the page image
    slow_frame_at: float = 0.0   # time.monotonic() when the timeline and the boxes were last drawn
    downloads: tuple[Path, Path] | None = None  # (.md, .json) of the finished pages, written once
    closed: threading.Event = field(default_factory=threading.Event)  # its handler's stream has ended

    def uri(self, index: int) -> str:
        if index not in self.uris:
            self.uris[index] = image_uri(self.job.pages[index].image)
        return self.uris[index]

    def with_output(self) -> list[int]:
        """Pages the navigator offers: finished ones, and stopped ones with some output."""
        return [i for i, v in enumerate(self.job.views) if v.result is not None and (not v.result.cancelled or v.tokens)]

    def shown(self) -> int:
        """The page on screen: the pinned one, else the one being decoded, else the last with output."""
        if self.pinned is not None:
            return self.pinned
        return self.job.current if self.job.running else (self.with_output() or [0])[-1]

    def discard_downloads(self) -> None:
        """Our copies only: Gradio serves its own cached copies (deleted after CACHE_SECONDS)."""
        if self.downloads is not None:
            shutil.rmtree(self.downloads[0].parent, ignore_errors=True)
            self.downloads = None


# ---- layout ---------------------------------------------------------------------------------------

def build_demo(engine: Engine, limits: Limits = Limits(), cache_seconds: int = CACHE_SECONDS) -> gr.Blocks:
    """The app over `engine`; documents are loaded within `limits` (serve it with the same
    limits: `launch(demo, limits)`), Gradio's cached files are deleted after `cache_seconds`."""
    handlers = Handlers(engine, limits, cache_seconds)
    with gr.Blocks(title="HPD-Parsing: hierarchical parallel decoding, live", analytics_enabled=False,
                   delete_cache=(cache_seconds, cache_seconds), fill_width=True) as demo:
        gr.Markdown("# HPD-Parsing, live\nA layout branch writes one `<BLOCK>label [box]<FORK>` per block; "
                    "each `<FORK>` starts a child branch that writes the block. P-MTP drafts tokens that "
                    "one forward verifies. Click a box, a tree row or a Markdown block to see the three together.",
                    elem_id="header")
        with gr.Tab("Parse", id="parse"):
            document, options, parse_button, stop_button, panel = _parse_tab(engine)
        with gr.Tab("Compare", id="compare", visible=getattr(engine.info, "extensions", True)):
            mode, compare_button, compare_stop, compare_panel = _compare_tab()
        buttons = Buttons(parse_button, stop_button, mode, compare_button, compare_stop)
        handlers.wire(document, options, buttons, panel, compare_panel)
        demo.unload(handlers.forget)
    demo.queue(default_concurrency_limit=1, max_size=64)  # beyond 64 waiting requests: "queue is full"
    return demo


def _parse_tab(engine: Engine):
    """Inputs on the left; on the right the live status, statistics and branch tree above the page
    (with its boxes) and the rendered Markdown side by side; branch outputs and timeline below."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=270):
            file = gr.File(label="Document (PDF, PNG, JPEG, WebP, TIFF, BMP)", file_types=FILE_TYPES,
                           type="filepath", elem_id="document")
            if shown := examples(model=bundled_name(engine.info.path)):
                gr.Examples([[str(e.path)] for e in shown], inputs=[file], label="Example documents",
                            example_labels=[e.label for e in shown])
            with gr.Row():
                page = gr.Slider(1, 2, value=1, step=1, label="Page", visible=False, elem_id="page")
                dpi = gr.Slider(50, 300, value=engine.info.render_dpi, step=10, label="Render DPI (PDF)",
                                elem_id="dpi")
            pages = gr.Textbox(label="Pages to parse", placeholder="empty: the page above; 1-3,7; 5-; all",
                               visible=False, elem_id="pages")
            password = gr.Textbox(label="PDF password", type="password", visible=False, elem_id="password")
            with gr.Row():
                parse_button = gr.Button("Parse", variant="primary", elem_id="parse")
                stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
            status = gr.HTML(status_html("Upload a document or pick an example, then press Parse."),
                             elem_id="status")
            navigator = gr.Radio([], label="Finished pages", visible=False, elem_id="navigator")
            options = _options_panel(engine)
            gr.Markdown(info_markdown(engine.info), elem_id="engine-info")
        with gr.Column(scale=4):
            with gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=360):
                    stats = gr.HTML(elem_id="stats")
                    sparkline = gr.HTML(elem_id="sparkline")
                with gr.Column(scale=2, min_width=300):
                    tree = gr.HTML(elem_id="tree")
            with gr.Row(equal_height=False):
                with gr.Column(scale=1, min_width=360):
                    image = gr.HTML(page_html(None), elem_id="page-image")
                    legend = gr.HTML(elem_id="label-legend")
                with gr.Column(scale=1, min_width=360):
                    markdown = gr.Markdown(latex_delimiters=LATEX, elem_id="markdown", max_height=760,
                                           label="Markdown", show_label=True, container=True)
    with gr.Tabs():
        with gr.Tab("Branch outputs", id="outputs"):
            branches = gr.HTML(elem_id="branches")
        with gr.Tab("Timeline", id="timeline"):
            gr.Markdown("One row per branch (0 = layout branch), x = decode round, coloured by label; "
                        "dark ticks: steps with accepted drafts (taller = more).")
            timeline = gr.HTML(elem_id="timeline")
        with gr.Tab("Raw Markdown", id="raw"):
            raw = gr.Code(language="markdown", elem_id="raw", interactive=False)
        with gr.Tab("JSON", id="json"):
            json = gr.JSON(elem_id="json")
    with gr.Row():
        download_md = gr.DownloadButton("Download .md", visible=False, elem_id="download-md")
        download_json = gr.DownloadButton("Download .json", visible=False, elem_id="download-json")
    panel = ParsePanel(status, navigator, stats, sparkline, tree, branches, timeline, image, legend, markdown, raw,
                       json, download_md, download_json)
    return Document(file, page, dpi, password, pages), options, parse_button, stop_button, panel


def _options_panel(engine: Engine) -> tuple[gr.components.Component, ...]:
    """One control per ParseOptions field (`forms.option_specs`), in field order: the handlers take
    their values in that order. Without a P-MTP head, use_mtp is off and fixed."""
    controls = []
    with gr.Accordion("Decoding options", open=True):
        for spec in option_specs():
            default = spec.default and engine.info.mtp if spec.name == "use_mtp" else spec.default
            controls.append(_control(spec, default, interactive=spec.name != "use_mtp" or engine.info.mtp))
    return tuple(controls)


def _control(spec: OptionSpec, default, interactive: bool) -> gr.components.Component:
    common = dict(label=spec.name, info=spec.help, elem_id=spec.name.replace("_", "-"), interactive=interactive)
    if spec.kind is bool:
        return gr.Checkbox(default, **common)
    if spec.choices:
        return gr.Radio(list(spec.choices), value=default, **common)
    if spec.low is not None and spec.high is not None:
        return gr.Slider(spec.low, spec.high, value=default, step=1 if spec.kind is int else 0.05, **common)
    return gr.Number(default, minimum=spec.low, precision=0 if spec.kind is int else None, **common)


def _compare_tab():
    gr.Markdown("Decodes the document page selected on the Parse tab twice, with its options except the "
                "compared one. Greedy decoding: MTP and batching must not change a single token.")
    with gr.Row():
        mode = gr.Radio(list(MODES), value=next(iter(MODES)), label="Compare", elem_id="compare-mode")
        compare_button = gr.Button("Compare", variant="primary", elem_id="compare")
        compare_stop = gr.Button("Stop", variant="stop", elem_id="compare-stop")
    status = gr.HTML(status_html("Pick a document on the Parse tab, then press Compare."), elem_id="compare-status")
    sides = []
    with gr.Row():
        for name in "ab":
            with gr.Column(elem_id=f"side-{name}"):
                sides.append(Side(gr.Markdown(f"### {name.upper()}"), gr.HTML(elem_id=f"stats-{name}"),
                                  gr.HTML(elem_id=f"sparkline-{name}"), gr.HTML(elem_id=f"timeline-{name}")))
    summary = gr.HTML(elem_id="compare-summary")
    diff = gr.HTML(elem_id="compare-diff")
    return mode, compare_button, compare_stop, ComparePanel(status, sides[0], sides[1], summary, diff)


def launch(demo: gr.Blocks, limits: Limits = Limits(), **kwargs):
    """`demo.launch` with the app's theme, CSS and upload limit (`limits.max_file_bytes`)."""
    return demo.launch(theme=gr.themes.Soft(primary_hue="blue"), css=CSS, js=SELECT_JS,
                       max_file_size=limits.max_file_bytes, **kwargs)


# ---- handlers -------------------------------------------------------------------------------------

class Handlers:
    """Event handlers of one demo. One job at a time per browser session; the engine's lock and
    the queue's concurrency group keep the sessions' decodes one after another."""

    def __init__(self, engine: Engine, limits: Limits = Limits(), cache_seconds: int = CACHE_SECONDS):
        self.engine, self.limits, self.cache_seconds = engine, limits, cache_seconds
        self.runs: dict[str, Run] = {}   # session hash -> its current (or last) run; oldest first
        self.runs_lock = threading.Lock()
        self.run_numbers = itertools.count(1)
        self.downloads_dir = tempfile.TemporaryDirectory(prefix="hpd-demo-")  # removed with the Handlers
        self.downloads = Path(self.downloads_dir.name)
        self.document: Document | None = None          # set by wire()
        self.parse_panel: ParsePanel | None = None
        self.compare_panel: ComparePanel | None = None
        self.cache: str | None = None                   # set by wire()

    def wire(self, document: Document, options: tuple, buttons: Buttons, panel: ParsePanel,
             compare_panel: ComparePanel) -> None:
        """Connect the events; the handlers answer with {component: value} of these panels."""
        self.document, self.parse_panel, self.compare_panel = document, panel, compare_panel
        self.cache = document.file.GRADIO_CACHE  # Gradio's upload folder
        d, p, c, b = document, panel, compare_panel, buttons
        preview_out = [d.page, d.password, d.pages, p.page, p.legend, p.status]
        d.file.change(self.open_document, [d.file, d.dpi, d.password], preview_out, api_name="open_document")
        d.password.submit(self.open_document, [d.file, d.dpi, d.password], preview_out, api_name="unlock")
        gr.on([d.page.release, d.dpi.release], self.show_page, [d.file, d.page, d.dpi, d.password],
              [p.page, p.legend, p.status], api_name="show_page")
        parsing = b.parse.click(self.parse, [*d, *options], list(p), api_name="parse",
                                     concurrency_id="engine", concurrency_limit=1, show_progress="minimal")
        b.stop.click(self.stop, None, list(p), api_name="stop", cancels=[parsing], concurrency_limit=None)
        p.navigator.input(self.show_result, [p.navigator], list(p), api_name="show_result", concurrency_limit=None)
        compare_out = [c.status, *c.a, *c.b, c.summary, c.diff]
        comparing = b.compare.click(self.compare, [*d, b.compare_mode, *options], compare_out,
                                    api_name="compare", concurrency_id="engine", concurrency_limit=1,
                                    show_progress="minimal")
        b.compare_stop.click(self.stop_compare, None, [c.status], api_name="stop_compare", cancels=[comparing],
                             concurrency_limit=None)

    # -- documents --

    def open_document(self, path: str | None, dpi: float, password: str):
        d, p = self.document, self.parse_panel
        hidden = gr.Slider(value=1, minimum=1, maximum=2, visible=False)  # a slider needs min < max
        if not path:
            return {d.page: hidden, d.password: gr.Textbox(visible=False), d.pages: gr.Textbox(value="", visible=False),
                    p.page: page_html(None), p.legend: "",
                    p.status: status_html("Upload a document or pick an example, then press Parse.")}
        try:
            pages = count_pages(path, password or None, self.limits)
            page = load_page(path, 1, dpi, password, self.limits)
        except PasswordRequired as err:
            gr.Warning(str(err))
            return {d.page: hidden, d.password: gr.Textbox(visible=True), p.page: page_html(None), p.legend: "",
                    p.status: status_html(f"{err}. Enter it and press Enter.", "error")}
        except DocumentError as err:
            gr.Warning(str(err))
            return {d.page: hidden, d.password: gr.Textbox(visible=bool(password)), p.page: page_html(None),
                    p.legend: "",
                    p.status: status_html(str(err), "error")}
        message = noted(f"{page.source}: {pages:,} page{'s' * (pages > 1)}. Press Parse.", page)
        return {d.page: gr.Slider(value=1, minimum=1, maximum=max(pages, 2), visible=pages > 1),
                d.pages: gr.Textbox(value="", visible=pages > 1),
                d.password: gr.Textbox(visible=bool(password)), p.page: page_html(page.image), p.legend: "",
                p.status: status_html(message)}

    def show_page(self, path: str | None, number: float, dpi: float, password: str):
        p = self.parse_panel
        if not path:
            return {p.page: page_html(None), p.legend: ""}
        try:
            page = load_page(path, number, dpi, password, self.limits)
        except DocumentError as err:
            gr.Warning(str(err))
            return {p.page: page_html(None), p.legend: "", p.status: status_html(str(err), "error")}
        return {p.page: page_html(page.image), p.legend: "", p.status: status_html(
            noted(f"{page.source}, page {page.number}. Press Parse.", page))}

    # -- parsing --

    def parse(self, request: gr.Request, path, number, dpi, password, spec, *options):
        p = self.parse_panel
        try:
            selection = selection_or_error(path, number, spec, dpi, password, self.limits)
        except gr.Error as err:
            yield {p.status: status_html(err.message, "error")}
            raise
        with self._running(request, selection, options_or_error(options)) as run:
            yield {p.status: self._status(run), p.navigator: gr.Radio(choices=[], visible=False),
                   p.page: page_html(None, uri=run.uri(0)), p.legend: "", p.markdown: "", p.raw: "", p.json: None,
                   p.timeline: "",
                   p.download_md: gr.DownloadButton(visible=False),
                   p.download_json: gr.DownloadButton(visible=False)}
            for _ in run.job.frames():
                yield self._live(run)
            if run.job.error is not None:
                yield {p.status: status_html(f"Decoding failed: {run.job.error}", "error", run.number)}
                raise gr.Error(f"Decoding failed: {run.job.error}", print_exception=False)
            yield self._final(run)

    @contextmanager
    def _running(self, request: gr.Request, selection: Selection, options: ParseOptions) -> Iterator[Run]:
        """A job decoding the selected pages, kept as the session's run (for Stop and the page
        navigator) until the session ends. On exit, also when Stop or a closed tab closes the
        handler, the job is cancelled: the engine is free again."""
        try:
            job = ParseJob(self.engine, selection.pages, options)  # renders the first batch of pages
        except DocumentError as err:
            raise gr.Error(str(err), print_exception=False) from err
        run = Run(job, selection.source, selection.numbers, next(self.run_numbers))
        self._keep(request.session_hash or "api", run)
        try:
            yield run
        finally:
            run.job.cancel()
            run.closed.set()

    def _keep(self, session: str, run: Run) -> None:
        """Make `run` the session's run. The session's previous run and, beyond MAX_RUNS sessions,
        the oldest runs (finished: decodes run one at a time) are dropped with their files."""
        with self.runs_lock:
            dropped = [self.runs.pop(session, None)]
            self.runs[session] = run
            while len(self.runs) > MAX_RUNS:
                dropped.append(self.runs.pop(next(iter(self.runs))))
        for old in filter(None, dropped):
            old.discard_downloads()
        sweep_leftovers(self.cache, self.cache_seconds)

    def _live(self, run: Run) -> dict:
        """The status and navigator; unless a finished page is pinned, the view of the page being
        decoded (a fresh page image when decoding has moved on to the next page)."""
        p = self.parse_panel
        with run.job.lock:
            out = {p.status: self._status(run), **self._navigator(run)}
            if run.pinned is not None:
                return out
            index = run.job.current
            view = run.job.views[index]
            if index != run.drawn:
                run.drawn, run.shown_boxes, run.slow_frame_at = index, (), 0.0
                out.update({p.page: page_html(None, uri=run.uri(index)), p.legend: "", p.markdown: "", p.raw: "",
                            p.json: None})
            blocks = blocks_of_branches(view, view.layout_blocks())
            out.update({p.stats: stats_html(view.summary()), p.sparkline: sparkline_svg(view.history, *SPARKLINE),
                        p.tree: tree_html(view, blocks), p.branches: branches_html(view, blocks)})
            if time.monotonic() - run.slow_frame_at >= SLOW_FRAME_SECONDS:
                run.slow_frame_at = time.monotonic()
                out.update(self._slow_frame(run, view))
        return out

    def _slow_frame(self, run: Run, view) -> dict:
        """The timeline, and the page image when the layout branch has announced new boxes."""
        p = self.parse_panel
        out = {p.timeline: timeline_svg(list(view.branches.values()), view.round, view.options.draft_tokens)}
        blocks = view.layout_blocks()
        boxes = tuple((b.label, b.bbox) for b in blocks if b.bbox is not None)
        if boxes != run.shown_boxes:
            run.shown_boxes = boxes
            out[p.page] = page_html(None, blocks, run.uri(run.drawn))
            out[p.legend] = label_legend(b.label for b in blocks)
        return out

    def _navigator(self, run: Run) -> dict:
        """The navigator, when its choices have changed: while decoding "follow" and the pages
        with output; after, those pages. Hidden for a single page."""
        choices = [(f"page {run.numbers[i]}" + " (stopped)" * run.job.views[i].result.cancelled, i)
                   for i in run.with_output()]
        if run.job.running:
            choices.insert(0, ("follow decoding", FOLLOW))
        if choices == run.listed:
            return {}
        run.listed = choices
        value = FOLLOW if run.job.running and run.pinned is None else run.shown()
        return {self.parse_panel.navigator: gr.Radio(choices=choices, value=value, visible=len(run.numbers) > 1)}

    def _status(self, run: Run) -> str:
        """Progress over pages while decoding; the outcome after."""
        job, total = run.job, len(run.numbers)
        if job.running:
            index, view = job.current, job.view
            shown = f"; showing page {run.numbers[run.pinned]}" if run.pinned is not None else ""
            progress = f" ({len(job.finished)} of {total} pages done{shown})" if total > 1 else ""
            return status_html(f"Decoding page {run.numbers[index]} of {run.source}: {len(view.branches)} "
                               f"branches…{progress}", "running", run.number)
        index = run.shown()
        page, result = job.pages[index], job.views[index].result
        s = result.stats
        verb = "Stopped; partial output of" if result.cancelled else "Parsed"
        message = (f"{verb} page {page.number} of {run.source}: {len(result.blocks)} blocks, "
                   f"{s.generated_tokens:,} tokens in {s.wall_seconds:.2f} s "
                   f"({s.tokens_per_second:,.0f} tok/s, τ = {s.mean_accepted_length:.2f}).")
        stopped = any(v.result.cancelled for v in job.views) or len(job.views) < total
        if total > 1:
            done = [run.numbers[i] for i in job.finished]
            tokens = sum(job.views[i].result.stats.generated_tokens for i in job.finished)
            head = (f"Stopped: {len(done)} of {total} pages of {run.source} finished ({page_list(done)})"
                    if stopped else f"Parsed {total} pages of {run.source}")
            message = f"{head}: {tokens:,} tokens in {job.seconds:.1f} s. Showing: {message}"
        return status_html(noted(message, page), "error" if stopped else "done", run.number)

    def _final(self, run: Run) -> dict:
        with run.job.lock:
            return {self.parse_panel.status: self._status(run), **self._navigator(run),
                    **self._shown(run, run.shown()), **self._download_buttons(run)}

    def _shown(self, run: Run, index: int) -> dict:
        """Everything about one page with a result."""
        p, view = self.parse_panel, run.job.views[index]
        result = view.result
        blocks = blocks_of_branches(view, result.blocks)
        run.drawn = index
        return {p.stats: stats_html(view.summary()), p.sparkline: sparkline_svg(view.history, *SPARKLINE),
                p.tree: tree_html(view, blocks), p.branches: branches_html(view, blocks),
                p.timeline: timeline_svg(list(view.branches.values()), view.round, view.options.draft_tokens),
                p.page: page_html(None, result.blocks, run.uri(index)),
                p.legend: label_legend(b.label for b in result.blocks),
                p.markdown: katex_markdown(marked_markdown(result.blocks)), p.raw: result.markdown,
                p.json: result.to_dict()}

    def _download_buttons(self, run: Run) -> dict:
        p, files = self.parse_panel, self._downloads(run)
        if files is None:
            return {p.download_md: gr.DownloadButton(visible=False), p.download_json: gr.DownloadButton(visible=False)}
        return {p.download_md: gr.DownloadButton(value=str(files[0]), visible=True),
                p.download_json: gr.DownloadButton(value=str(files[1]), visible=True)}

    def _downloads(self, run: Run) -> tuple[Path, Path] | None:
        """The finished pages' files (None when no page finished), written once: Stop may render
        a run that the parse handler is rendering too, and Gradio copies the files only after the
        handlers return."""
        with self.runs_lock:
            finished = run.job.finished
            if run.downloads is None and finished:
                run.downloads = write_downloads(self.downloads, run.source, [run.job.pages[i] for i in finished],
                                                [run.job.views[i].result for i in finished])
            return run.downloads

    def show_result(self, request: gr.Request, choice):
        """The navigator: show a page with a result, or follow the page being decoded again."""
        with self.runs_lock:
            run = self.runs.get(request.session_hash or "api")
        if run is None or choice is None:
            return {}
        with run.job.lock:
            if int(choice) == FOLLOW or run.job.views[int(choice)].result is None:
                run.pinned = run.drawn = None  # the next live frame draws the page being decoded
                return {self.parse_panel.status: self._status(run)}
            run.pinned = int(choice)
            return {self.parse_panel.status: self._status(run), **self._shown(run, run.pinned)}

    def stop(self, request: gr.Request):
        run = self._stop(request)
        if run is None or run.job.running or not run.job.views[run.shown()].result:
            return {self.parse_panel.status: status_html("Nothing is running.")}
        return self._final(run)

    def _stop(self, request: gr.Request) -> Run | None:
        """Cancel the session's run and wait until its handler's stream has ended, so that Stop's
        answer follows the stream's last frame: a live frame rendered just before the cancel can
        then no longer overwrite Stop's final status (a likely cause of a CI failure under load)."""
        with self.runs_lock:
            run = self.runs.get(request.session_hash or "api")
        if run is not None:
            run.job.cancel()
            run.closed.wait(JOIN_SECONDS)
        return run

    def forget(self, request: gr.Request) -> None:
        """The session ended: stop its run and drop it."""
        self._stop(request)
        with self.runs_lock:
            run = self.runs.pop(request.session_hash or "api", None)
        if run is not None:
            run.discard_downloads()

    # -- comparing --

    def compare(self, request: gr.Request, path, number, dpi, password, _spec, mode, *options):
        """The page of the slider (a Pages selection is for Parse)."""
        page = page_or_error(path, number, dpi, password, self.limits)
        base = options_or_error(options)
        c = self.compare_panel
        variants = MODES[mode].variants
        shown = {side.title: f"### {name}: {v.name}" for name, side, v in zip("AB", (c.a, c.b), variants)}
        yield {c.summary: "", c.diff: "", **shown, **{part: "" for side in (c.a, c.b) for part in side[1:]}}
        results = []
        for name, side, variant in zip("AB", (c.a, c.b), variants):
            one = Selection(page.source, (page.number,), iter([page]))
            with self._running(request, one, variant_options(base, variant)) as run:
                status = status_html(f"Decoding {name}: {variant.name} (page {page.number} of {page.source})…",
                                     "running", run.number)
                for _ in run.job.frames():
                    yield {c.status: status, **self._side(side, run)}
            if run.job.error is not None:
                yield {c.status: status_html(f"Decoding failed: {run.job.error}", "error", run.number)}
                raise gr.Error(f"Decoding failed: {run.job.error}", print_exception=False)
            shown.update(self._side(side, run))
            results.append(run.job.view.result)
            if results[-1].cancelled:
                yield {c.status: status_html("Comparison stopped.", "error"), **shown}
                return
        comparison = Comparison(*results, self.engine.info.dtype, MODES[mode].same_tokens)
        yield {c.status: status_html(f"Compared on page {page.number} of {page.source}.", "done"), **shown,
               c.summary: comparison_html((variants[0].name, variants[1].name), comparison),
               c.diff: diff_html(comparison)}

    def _side(self, side: Side, run: Run) -> dict:
        with run.job.lock:
            view = run.job.view
            return {side.stats: stats_html(view.summary()), side.sparkline: sparkline_svg(view.history),
                    side.timeline: timeline_svg(list(view.branches.values()), view.round,
                                                view.options.draft_tokens)}

    def stop_compare(self, request: gr.Request):
        self._stop(request)
        return status_html("Comparison stopped; the engine is free.", "error")


# ---- inputs -> engine arguments -------------------------------------------------------------------

def blocks_of_branches(view, blocks) -> dict[int, int]:
    """{child branch: block number} of a page view (app.selection)."""
    return block_of_branch(blocks, ((b.branch, b.label, b.bbox) for b in view.branches.values() if b.branch))


def load_page(path: str, number: float, dpi: float, password: str | None, limits: Limits = Limits()) -> Page:
    return load_pages(path, [int(number)], dpi=float(dpi), password=password or None, limits=limits)[0]


def page_or_error(path: str | None, number: float, dpi: float, password: str | None,
                  limits: Limits = Limits()) -> Page:
    try:
        page = next(selection_or_error(path, number, "", dpi, password, limits).pages)
    except DocumentError as err:
        raise gr.Error(str(err), print_exception=False) from err
    for warning in page.warnings:
        gr.Warning(warning)
    return page


def selection_or_error(path: str | None, number: float, spec: str | None, dpi: float, password: str | None,
                       limits: Limits = Limits()) -> Selection:
    """The pages of `spec` ("1-3,7", "5-", "all"), or page `number` when it is empty; checked
    against the document and `limits` here, rendered as the job takes them."""
    if not path:
        raise gr.Error("Upload a document or pick an example first.", print_exception=False)
    try:
        numbers = (parse_page_ranges(spec, count_pages(path, password or None, limits)) if (spec or "").strip()
                   else [int(number or 1)])
        pages = iter_pages(path, numbers, dpi or DEFAULT_DPI, password or None, limits)
    except DocumentError as err:
        raise gr.Error(f"Pages {spec.strip()!r}: {err}" if (spec or "").strip() else str(err),
                       print_exception=False) from err
    return Selection(display_name(path), tuple(numbers), pages)


def page_list(numbers) -> str:
    """"1-3, 7" for [1, 2, 3, 7]."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs) or "none"


def noted(message: str, page: Page) -> str:
    """`message` followed by the page's warnings (e.g. rendered at a lower DPI than asked)."""
    return " ".join([message, *(f"Note: {w}." for w in page.warnings)])


def options_or_error(values) -> ParseOptions:
    """ParseOptions of the controls' values (in `forms.option_specs` order)."""
    try:
        return ParseOptions(**{spec.name: value_of(spec, v) for spec, v in zip(option_specs(), values, strict=True)})
    except (TypeError, ValueError) as err:
        raise gr.Error(f"Invalid option: {err}", print_exception=False) from err


def value_of(spec: OptionSpec, value):
    """A control's value as the field's type (a cleared number box: the default)."""
    if value is None or value == "":
        return spec.default
    return spec.kind(value)
