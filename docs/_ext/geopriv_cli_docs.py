"""The command line's parser with every command's options, for sphinx-argparse (docs/cli.rst).

``geopriv.cli.build_parser`` adds a command's options only when that command is parsed or shown (so that
``geopriv --help`` imports none of the library); sphinx-argparse reads the parser's actions directly, so
this adds them all first, in nested commands too (``geopriv budget grant``).
"""

from __future__ import annotations

import argparse
import textwrap

from geopriv.cli import build_parser


def _fill(parser: argparse.ArgumentParser) -> None:
    add = getattr(parser, "_add_arguments", None)
    if add is not None:
        add()
    if parser.epilog:  # worked examples, laid out as written (the CLI's raw formatter): a literal block here
        parser.epilog = "::\n\n" + textwrap.indent(parser.epilog, "    ")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _fill(sub)


def full_parser() -> argparse.ArgumentParser:
    """:func:`geopriv.cli.build_parser`, with the options of every command added."""
    parser = build_parser()
    _fill(parser)
    return parser
