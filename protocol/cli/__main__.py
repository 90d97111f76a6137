"""`python -m protocol.cli`: the same entry point as the `veritrain` script."""

from protocol.cli.usage import main

main()
