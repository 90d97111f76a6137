"""The `veritrain` entry point: every usage error, ours or click's, is one `error:` line, exit 2."""

from __future__ import annotations

import re
import sys
from typing import Any

import typer
from typer._click import exceptions as click  # typer vendors click: its errors are its own classes

from protocol.core.errors import ConfigError

USAGE_EXIT = 2  # click's own code for usage errors, kept for ours
NEGATIVE_NUMBER = re.compile(r"^-\d")


class BadUsage(ConfigError):
    """A command given a bad argument or option value (exit 2, like click's usage errors)."""


def usage_line(exc: click.UsageError) -> str:
    """One line for a click usage error: its message, with the command it was given to and a
    pointer to `--help`; a negative amount (`unbond -5`, which click reads as an option) says so."""
    if isinstance(exc, click.NoSuchOption) and NEGATIVE_NUMBER.match(exc.option_name):
        return f"amounts must be positive, got {exc.option_name}"
    message = " ".join(exc.format_message().split())
    ctx = exc.ctx
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"{message}{where}"


def flags_show_no_type() -> None:
    """Help lists a flag (`--help`, `--move`, `--json`) without a type: typer 0.29 shows every
    option's type, so a flag read `--help <bool>`, as if it took a value. Idempotent."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "flags_show_no_type", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag and self.metavar is None else shown(self, ctx)

    display_type_rich.flags_show_no_type = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def run(app: typer.Typer, args: list[str] | None = None) -> int:
    """Run the app without click's standalone handling, so that its usage errors (bad option
    values, missing options, unknown commands) come out as one line; returns the exit code."""
    try:
        result: Any = app(args=args, standalone_mode=False)
    except click.NoArgsIsHelpError as exc:  # `veritrain` or `veritrain keys` alone: the help
        typer.echo(exc.ctx.get_help())
        return 0
    except click.UsageError as exc:
        typer.echo(f"error: {usage_line(exc)}", err=True)
        return USAGE_EXIT
    except typer.Abort:  # Ctrl-C or EOF at a prompt
        typer.echo("error: aborted", err=True)
        return 1
    except click.ClickException as exc:  # e.g. a file option that does not exist
        typer.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        return exc.exit_code
    return result if isinstance(result, int) else 0


def main() -> None:
    """`veritrain` and `python -m protocol.cli`: the app, then exit with its code."""
    from protocol.cli.app import app

    sys.exit(run(app))
