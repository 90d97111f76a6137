"""The explorer rounds token amounts as `inspect` does: format.js `tokens` and `exactTokens`
under Node agree with `human.rounded_tokens` and `human.tokens` on edge and random amounts.
Skipped without `node` (the browser test checks the page itself)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

from protocol.cli.human import rounded_tokens, tokens
from tests.conftest import REPO

RUN = """
const fs = require("fs");
eval(fs.readFileSync(process.argv[1], "utf8").replace('"use strict";', ""));
const amounts = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify(amounts.map((a) => [tokens(BigInt(a)), exactTokens(BigInt(a))])));
"""


def test_format_js_rounds_as_python() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    rng = random.Random(29)
    amounts = [1000 * 10**18 - 1, 1, 0, -(10**18) // 2, 5 * 10**13, 5 * 10**13 - 1, 10**27 + 123,
               11_488_367_650_000_000_000_000, *(rng.randrange(10 ** rng.randrange(1, 28)) for _ in range(500))]
    out = subprocess.run([node, "-e", RUN, str(REPO / "protocol/explorer/static/format.js")],
                         input=json.dumps([str(a) for a in amounts]), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[rounded_tokens(a, grouped=True), tokens(a, grouped=True)] for a in amounts]
