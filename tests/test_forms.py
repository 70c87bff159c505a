"""Every ParseOptions field reaches every front door with no edit of its own: hpd-parse's flags,
hpd-serve's request fields (and the remote client's body), and the app's controls."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

import pytest

from hpd_core.options import ParseOptions, option
from hpd_tools import cli
from hpd_tools.forms import (add_option_arguments, option_specs, options_from_args, options_from_json,
                             options_to_json, request_specs)
from hpd_tools.server import ServeConfig, parse_chat_request
from tests.test_server import body, data_url


@dataclass(frozen=True)
class WithBeam(ParseOptions):
    """ParseOptions with one more decoding option, as a future change would add it."""
    beam_width: int = option(3, "a new decoding option", low=1, high=8)


def other_values(options_type=ParseOptions) -> dict:
    """A valid value other than the default for each field."""
    changed = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: round(v + 0.1, 2)}
    out = {}
    for spec in option_specs(options_type):
        if spec.choices:
            out[spec.name] = next(c for c in spec.choices if c != spec.default)
        else:
            out[spec.name] = changed[spec.kind](spec.default)
    return out


def test_a_field_added_to_a_subclass_becomes_a_flag_and_a_request_field():
    parser = argparse.ArgumentParser()
    add_option_arguments(parser, WithBeam)
    assert "--beam-width" in parser.format_help() and "a new decoding option" in parser.format_help()
    assert options_from_args(parser.parse_args(["--beam-width", "5"]), WithBeam).beam_width == 5
    assert options_from_args(parser.parse_args([]), WithBeam) == WithBeam()
    assert "beam_width" in {s.name for s in request_specs(WithBeam)}
    assert options_from_json({"beam_width": 7}, WithBeam()).beam_width == 7
    assert options_to_json(WithBeam(beam_width=4))["beam_width"] == 4


def test_every_field_is_a_flag_of_hpd_parse_with_the_dataclass_default():
    parser = cli.build_parser()
    defaults = parser.parse_args(["in.pdf", "-o", "out"])
    assert options_from_args(defaults) == ParseOptions()
    values = other_values()
    argv = ["in.pdf", "-o", "out"]
    for spec in option_specs():
        value = values[spec.name]
        if spec.kind is bool:
            argv.append(spec.flag if value else f"--no-{spec.flag[2:]}")
        else:
            argv += [spec.flag, str(value)]
    assert options_from_args(parser.parse_args(argv)) == ParseOptions(**values)


def test_every_field_but_prompt_and_budget_is_a_request_field_of_hpd_serve():
    names = {f.name for f in fields(ParseOptions)}
    assert {s.name for s in request_specs()} == names - {"prompt", "max_new_tokens"}
    values = {k: v for k, v in other_values().items() if k in {s.name for s in request_specs()}}
    from PIL import Image
    request = parse_chat_request(body(data_url(Image.new("RGB", (8, 8))), **values), ServeConfig(), ParseOptions())
    assert request.options == ParseOptions(max_new_tokens=3, **values)
    assert options_from_json(options_to_json(ParseOptions(**values)), ParseOptions()) == ParseOptions(**values)


@pytest.mark.parametrize("name, value", [("use_mtp", 1), ("num_speculative_tokens", True),
                                         ("draft_confidence", "0.5"), ("max_page_tokens", 2.0)])
def test_a_request_field_of_the_wrong_json_type_names_the_field(name, value):
    with pytest.raises(TypeError, match=name):
        options_from_json({name: value}, ParseOptions())


def test_every_field_is_a_control_of_the_app_in_field_order(app_engine):
    from app.ui import _options_panel
    import gradio as gr
    with gr.Blocks():
        controls = _options_panel(app_engine)
    assert [c.elem_id for c in controls] == [f.name.replace("_", "-") for f in fields(ParseOptions)]
    assert [c.value for c in controls] == [getattr(ParseOptions(), f.name) for f in fields(ParseOptions)]
