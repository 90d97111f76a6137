"""`python -m protocol.cli.app`: the same app as the `veritrain` script."""

from protocol.cli.app import app

app()
