"""The explorer page in a real headless Chromium: after two settled rounds on anvil, the page
served by `veritrain explorer` shows the figures `veritrain inspect --json` prints (token
amounts rounded as `inspect` rounds them, the exact amount on hover; scores, held-out losses,
local times, when each phase closed), follows new blocks, and leaves a screenshot.

Needs chromium and chromedriver (Debian: `chromium`, `chromium-driver`; .ci/run installs them):
skipped without them, failed under CI (CI=true or VERITRAIN_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.deployment import save_deployment
from protocol.chain.scripted import ScriptedNetwork, claim_all, join_network, play_round
from protocol.cli.human import tokens as exact_tokens
from protocol.cli.inspect_render import tokens
from protocol.config.run_config import RunConfig
from tests.conftest import REPO, missing_tool, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.anvil]

WAIT_S = 60  # page loads and redraws; generous for a loaded 2-core machine
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _binary(env: str, names: tuple[str, ...]) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if Path(given).is_file() else None
    return next((found for name in names if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing_tool("selenium is not installed: pip install -e '.[dev]'", "VERITRAIN_REQUIRE_BROWSER")
    chromium = _binary("VERITRAIN_CHROMIUM", CHROMIUM_NAMES)
    driver_path = _binary("VERITRAIN_CHROMEDRIVER", ("chromedriver",))
    if chromium is None or driver_path is None:
        missing_tool(f"chromium ({chromium or 'missing'}) and chromedriver ({driver_path or 'missing'}) are needed: "
                     "apt-get install chromium chromium-driver (done by .ci/run)", "VERITRAIN_REQUIRE_BROWSER")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--disable-dev-shm-usage", "--window-size=1400,2600", "--disable-gpu"):
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root (containers)
    # explicit paths: selenium's driver manager would otherwise try to download one
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def chain(anvil, tmp_path_factory) -> tuple[ChainClient, ScriptedNetwork, Path]:
    """Two settled rounds on anvil (a fraud report confirmed and slashed in round 0), claims made."""
    handle = connect(anvil.url)
    deployer = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(deployer, 3, 2, lambda _line: None)
    play_round(deployer, net, lambda _line: None)
    play_round(deployer, net, lambda _line: None, cheat=False)
    claim_all(net)
    dep_path = tmp_path_factory.mktemp("explorer") / "deployment.json"
    save_deployment(deployer.deployment, dep_path)
    return deployer, net, dep_path


@pytest.fixture(scope="module")
def explorer_url(anvil, chain) -> Iterator[str]:
    """`veritrain explorer` in its own process, as a user starts it; stopped with Ctrl-C."""
    _, _, dep_path = chain
    proc = subprocess.Popen([sys.executable, "-m", "protocol.cli.app", "explorer", "--rpc", anvil.url,
                             "--deployment", str(dep_path), "--port", "0"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        line = _first_line(proc, 120)
        found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert found, f"no URL printed: {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"  # type: ignore[union-attr]
        yield found.group(1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and err.strip() == "explorer stopped", err
    finally:
        if proc.poll() is None:
            stop_process(proc)


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline()  # type: ignore[union-attr]


def inspect(anvil, dep_path: Path, *view: str) -> Any:
    """`veritrain inspect VIEW --json` (the real command, in this process), its "data"."""
    from typer.testing import CliRunner

    from protocol.cli.app import app

    result = CliRunner().invoke(app, ["inspect", *view, "--rpc", anvil.url, "--deployment", str(dep_path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["data"]


def score(value: int) -> str:
    return f"{value / 65535:.3f}"


def wait_for(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def cell(scope: Any, col: str) -> Any:
    return scope.find_element("css selector", f'td[data-col="{col}"]')


def assert_tokens(scope: Any, col: str, amount: int) -> None:
    """An amount shown as inspect's tables round it, its exact amount in the title (on hover)
    and its base units in data-value."""
    shown = cell(scope, col)
    assert (shown.get_attribute("data-value"), shown.text, shown.get_attribute("title")) == \
        (str(amount), tokens(amount), exact_tokens(amount, grouped=True)), col


def local_time(driver: Any, seconds: int) -> str:
    return driver.execute_script("return new Date(arguments[0] * 1000).toLocaleString();", seconds)


def test_the_page_shows_what_inspect_prints(browser, anvil, chain, explorer_url, tmp_path):
    deployer, net, dep_path = chain
    block = int(deployer.w3.eth.block_number)
    browser.get(explorer_url)
    wait_for(browser, f'#status[data-block="{block}"]')

    summary = inspect(anvil, dep_path, "summary")
    for group in ("token", "totals"):
        for key, amount in summary[group].items():
            assert_tokens(browser.find_element("css selector", f'#summary-tokens tr[data-key="{group}.{key}"]'),
                          f"{group}.{key}", amount)
    for key in ("current_round", "miners", "validators", "eligible_miners", "chain_id"):
        assert cell(browser, key).text == str(summary[key])

    rounds = inspect(anvil, dep_path, "rounds")
    assert len(browser.find_elements("css selector", "#rounds tbody tr")) == len(rounds) == 3
    for r in rounds:
        row = browser.find_element("css selector", f'#rounds tr[data-round="{r["round"]}"]')
        assert cell(row, "phase").text == r["phase"]
        assert cell(row, "commits").text == str(r["commits"])
        assert cell(row, "start_time").text == local_time(browser, r["start_time"])
        if r["heldout_loss"] is None:
            assert cell(row, "heldout_loss").text == "—"
        else:
            assert float(cell(row, "heldout_loss").text) == r["heldout_loss"]
            assert_tokens(row, "minted", r["minted"])
            assert cell(row, "result").get_attribute("data-value") == r["result"]["final_root"]
    points = browser.find_elements("css selector", "#loss-svg circle.point")
    assert [(int(p.get_attribute("data-round")), float(p.get_attribute("data-value"))) for p in points] == \
        [(r["round"], r["heldout_loss"]) for r in rounds if r["heldout_loss"] is not None]

    for r in (0, 1):
        check_round(browser, inspect(anvil, dep_path, "round", str(r)), block)

    for member in (*net.miners, *net.validators):
        node = inspect(anvil, dep_path, "node", member.address)
        row = browser.find_element("css selector", f'#nodes tr[data-address="{member.address}"]')
        for key in ("staked", "unbonding", "token_balance", "cumulative_earned", "claimed", "claimable", "slashed"):
            assert_tokens(row, key, node[key])
        shown = cell(row, "reputation")  # a miner's alone: a validator's reads — (the caption says why)
        assert (shown.get_attribute("data-value"), shown.text) == \
            (str(node["reputation"]), score(node["reputation"]) if node["role"] == "miner" else "—")
    assert "Validators have none" in browser.find_element("css selector", "#nodes caption").text

    disputes = inspect(anvil, dep_path, "disputes")
    row = browser.find_element("css selector", f'#disputes tr[data-id="{disputes[0]["id"]}"]')
    assert cell(row, "status").text == disputes[0]["status"] == "confirmed"
    assert_tokens(row, "slashed", disputes[0]["slashed"])
    assert [v.get_attribute("data-validator") for v in row.find_elements("css selector", "li")] == \
        [v.address for v in net.validators]

    cheater = inspect(anvil, dep_path, "node", disputes[0]["miner"])
    row.find_element("css selector", f'td[data-col="miner"] a[data-node="{cheater["address"]}"]').click()
    detail = wait_for(browser, f'#node-detail[data-address="{cheater["address"]}"][data-block="{block}"]')
    slash = detail.find_element("css selector", "#node-slashes tbody tr")
    assert_tokens(slash, "amount", cheater["slashes"][0]["amount"])
    assert_tokens(slash, "burned", cheater["slashes"][0]["burned"])
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []  # no script error, no failed load
    screenshot(browser, tmp_path)


def check_round(driver: Any, detail: dict[str, Any], block: int) -> None:
    """Open round N from the rounds table and compare its miners and validators with inspect's."""
    r = detail["round"]
    driver.find_element("css selector", f'#rounds a[data-round-link="{r}"]').click()
    section = wait_for(driver, f'#round-detail[data-round="{r}"][data-block="{block}"]')
    assert float(cell(section, "heldout_loss").text) == detail["heldout_loss"]
    phases = section.find_elements("css selector", "#round-facts tr[data-key^='closed.']")  # an ended round's
    assert [(p.find_element("css selector", "th").text, cell(p, p.get_attribute("data-key")).text) for p in phases] == \
        [(label, local_time(driver, detail["closed"][key])) for label, key in
         (("commit closed", "commit"), ("score closed", "score"), ("reveal closed", "reveal"),
          ("audit closed", "audit"), ("ended", "result"))]
    assert cell(section, "result.final_root").get_attribute("data-value") == detail["result"]["final_root"]
    for m in detail["miners"]:
        row = section.find_element("css selector", f'#round-miners tr[data-address="{m["address"]}"]')
        for key in ("consensus", "reputation"):
            assert (cell(row, key).get_attribute("data-value"), cell(row, key).text) == (str(m[key]), score(m[key]))
        assert_tokens(row, "reward", m["reward"])
        assert_tokens(row, "cumulative", m["cumulative"])
    for v in detail["validators"]:
        row = section.find_element("css selector", f'#round-validators tr[data-address="{v["address"]}"]')
        assert float(cell(row, "heldout_loss").text) == v["heldout_loss"]
        assert_tokens(row, "weight", v["weight"])
        assert_tokens(row, "reward", v["reward"])


def test_the_page_follows_new_blocks(browser, chain, explorer_url):
    """A commit lands in the open round: the page redraws without a reload."""
    deployer, net, _ = chain
    browser.get(explorer_url)
    r = deployer.current_round()
    row = f'#rounds tr[data-round="{r}"]'
    assert wait_for(browser, f'{row} td[data-col="commits"]').text == "0"
    net.miners[0].client.commit_update(r, b"\x01" * 32, b"\x02" * 32)
    block = int(deployer.w3.eth.block_number)
    wait_for(browser, f'#status[data-block="{block}"]')
    assert cell(browser.find_element("css selector", row), "commits").text == "1"


def screenshot(driver: Any, tmp_path: Path) -> None:
    """The page as a test artifact; also test-artifacts/explorer.png when VERITRAIN_ARTIFACTS is set."""
    driver.execute_script("window.scrollTo(0, 0);")
    height = driver.execute_script("return document.documentElement.scrollHeight;")
    driver.set_window_size(1400, min(int(height) + 40, 8000))
    path = tmp_path / "explorer.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    print(f"explorer screenshot: {path}")
    if os.environ.get("VERITRAIN_ARTIFACTS"):
        artifact = REPO / "test-artifacts" / "explorer.png"
        artifact.parent.mkdir(exist_ok=True)
        shutil.copy(path, artifact)
        print(f"explorer screenshot: {artifact}")


def test_a_round_that_does_not_exist_is_said_in_its_section(browser, chain, explorer_url):
    deployer, _, _ = chain
    browser.get(f"{explorer_url}#round=99&node=0x1234")
    section = wait_for(browser, '#round-detail[data-round="99"]')
    assert section.find_element("css selector", "#round-body").text == \
        f"round 99 does not exist (current round: {deployer.current_round()})"
    node = wait_for(browser, '#node-detail[data-address="0x1234"]')
    assert node.find_element("css selector", "#node-body").text == "not an address: '0x1234'"
    assert browser.find_element("id", "error").is_displayed() is False  # the chain itself answers


def test_inspect_tables_piped_keep_addresses_whole(anvil, chain):
    """The real `veritrain inspect` with stdout piped (no terminal, no COLUMNS): no column cut
    at 80 characters; amounts rounded unless --exact."""
    from typer.testing import CliRunner

    from protocol.cli.app import app

    _, net, dep_path = chain
    args = ["--rpc", anvil.url, "--deployment", str(dep_path)]
    result = CliRunner(env={"COLUMNS": None}).invoke(app, ["inspect", "round", "0", *args])
    assert result.exit_code == 0, result.output
    for member in (*net.miners, *net.validators):
        assert member.address in result.stdout, result.stdout
    minted = inspect(anvil, dep_path, "summary")["token"]["minted"]
    for flag, shown in (([], tokens(minted)), (["--exact"], exact_tokens(minted, grouped=True))):
        result = CliRunner().invoke(app, ["inspect", "summary", *args, *flag])
        assert re.search(rf"minted \(emission\)\W+{re.escape(shown)}\W", result.stdout), result.stdout
