"""Every CLI error is one `error:` line that keeps its text, brackets included."""

from __future__ import annotations

import pytest
import typer

from protocol.cli.app import one_line_errors
from protocol.core.errors import ConfigError


def test_an_error_naming_a_config_table_keeps_its_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    @one_line_errors
    def fails() -> None:
        raise ConfigError("[training.dataset] source 'packed' needs a path")

    with pytest.raises(typer.Exit) as info:
        fails()
    assert info.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: [training.dataset] source 'packed' needs a path"
