"""ParseOptions and documents.Limits as command-line flags and as JSON request fields, built from
the dataclasses' own fields, defaults and metadata: a field added to ParseOptions appears in
`hpd-parse --help`, in `hpd-serve`'s request fields and in the app's controls with no other edit.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import dataclass, fields, replace
from typing import Sequence

from hpd_core.documents import Limits
from hpd_core.options import ParseOptions

LIMIT_FLAGS = {f.name: "--" + f.name.replace("_", "-") for f in fields(Limits)}  # max_pages -> --max-pages
# Short or historical spellings kept beside the generated flags (--use-mtp/--no-use-mtp, ...).
ALIASES = {"num_speculative_tokens": ("-k",)}
NEGATIONS = {"use_mtp": "--no-mtp"}
# Fields a request sets elsewhere: the prompt through its instruction text, the budget as max_tokens.
REQUEST_ELSEWHERE = ("prompt", "max_new_tokens")


class UsageError(Exception):
    """Bad arguments: reported like argparse errors, exit code 2."""


@dataclass(frozen=True)
class OptionSpec:
    """One ParseOptions field as front doors see it."""
    name: str
    kind: type            # bool, int, float or str
    default: object
    help: str
    choices: tuple | None
    low: float | None     # inclusive bounds; None: unbounded
    high: float | None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value) -> None:
        """TypeError unless `value` has this field's exact JSON type (bool is no int, an int is a float)."""
        ok = (type(value) in (int, float) if self.kind is float else type(value) is self.kind)
        if not ok:
            raise TypeError(f"{self.name} must be {_ARTICLES[self.kind]}, got {value!r}")


_ARTICLES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def option_specs(options: type[ParseOptions] = ParseOptions) -> tuple[OptionSpec, ...]:
    """The fields of `options` (ParseOptions or a subclass), in declaration order."""
    hints = typing.get_type_hints(options)
    return tuple(OptionSpec(f.name, hints[f.name], f.default, f.metadata.get("help", ""), f.metadata.get("choices"),
                            f.metadata.get("low"), f.metadata.get("high")) for f in fields(options))


def request_specs(options: type[ParseOptions] = ParseOptions) -> tuple[OptionSpec, ...]:
    """The fields a JSON request may set by name (hpd-serve's extensions; the remote client sends them)."""
    return tuple(s for s in option_specs(options) if s.name not in REQUEST_ELSEWHERE)


# ---- argparse -----------------------------------------------------------------------------------

def add_option_arguments(parser: argparse.ArgumentParser, options: type[ParseOptions] = ParseOptions) -> None:
    """One flag per ParseOptions field (bools as --name / --no-name), defaults from the dataclass."""
    group = parser.add_argument_group("decoding options")
    for spec in option_specs(options):
        bounds = "" if spec.low is None else f" ({spec.low:g}-{spec.high:g})" if spec.high is not None \
            else f" (at least {spec.low:g})"
        text = f"{spec.help}{bounds}; default {spec.default}"
        if spec.kind is bool:
            group.add_argument(spec.flag, dest=spec.name, action=argparse.BooleanOptionalAction, default=spec.default,
                               help=text)
            if spec.name in NEGATIONS:
                group.add_argument(NEGATIONS[spec.name], dest=spec.name, action="store_false",
                                   help=f"the same as --no-{spec.flag[2:]}")
        else:
            group.add_argument(*ALIASES.get(spec.name, ()), spec.flag, dest=spec.name, type=spec.kind,
                               default=spec.default, choices=spec.choices, help=text)


def options_from_args(args: argparse.Namespace, options: type[ParseOptions] = ParseOptions) -> ParseOptions:
    try:
        return options(**{s.name: getattr(args, s.name) for s in option_specs(options)})
    except ValueError as err:
        raise UsageError(str(err)) from err


def add_limit_arguments(parser: argparse.ArgumentParser, names: Sequence[str] = tuple(LIMIT_FLAGS)) -> None:
    """documents.Limits flags, shared by hpd-parse, hpd-demo and hpd-serve; see `limits_of`."""
    group = parser.add_argument_group("document limits (default: the HPD_MAX_* environment variable, "
                                      "else the value shown)")
    for name in names:
        group.add_argument(LIMIT_FLAGS[name], type=int, metavar="N",
                           help=f"{getattr(Limits(), name):,} (HPD_{name.upper()})")


def limits_of(args: argparse.Namespace) -> Limits:
    """The limits of the flags given, else of the environment (Limits.from_env); UsageError if invalid."""
    try:
        given = {name: value for name in LIMIT_FLAGS if (value := getattr(args, name, None)) is not None}
        return replace(Limits.from_env(), **given)
    except ValueError as err:
        raise UsageError(str(err)) from err


# ---- JSON ---------------------------------------------------------------------------------------

def options_from_json(body: dict, defaults: ParseOptions, **given) -> ParseOptions:
    """`defaults` with the request fields `body` sets (None: not set) and `given`; TypeError for a
    value of the wrong type (naming the field), ValueError for one out of range."""
    values = dict(given)
    for spec in request_specs(type(defaults)):
        if body.get(spec.name) is not None:
            spec.check(body[spec.name])
            values[spec.name] = body[spec.name]
    return replace(defaults, **values)


def options_to_json(options: ParseOptions) -> dict:
    """The request fields of `options` (the inverse of `options_from_json`)."""
    return {s.name: getattr(options, s.name) for s in request_specs(type(options))}
