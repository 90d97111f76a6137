"""The docs stay true to the tree: every module is named in docs/ARCHITECTURE.md, every path the
docs name exists, every relative link and anchor resolves, and the README keeps the two
commands `.ci/run` runs verbatim."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", *DOCS]
PACKAGES = ("protocol", "miner", "validator")
CODE_PATH = re.compile(r"(?<![\w/.-])((?:protocol|miner|validator|contracts|benchmarks|tests)/[\w/.-]*\w\.(?:py|vy|vyi|json|toml))")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def modules() -> list[str]:
    found = (p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))
    return sorted(str(p.relative_to(REPO)) for p in found if p.name != "__init__.py")


def contract_sources() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "contracts").glob("*.vy"))


def test_every_module_is_named_in_architecture_by_its_path() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    missing = [m for m in [*modules(), *contract_sources()] if f"`{m}`" not in text]
    assert not missing, "docs/ARCHITECTURE.md §2 names no such module (add a one-line row): " + ", ".join(missing)


def test_every_code_path_the_docs_name_exists() -> None:
    stale = []
    for page in PAGES:
        for path in sorted(set(CODE_PATH.findall(page.read_text()))):
            if not (REPO / path).exists():
                stale.append(f"{page.relative_to(REPO)}: {path}")
    assert not stale, "the docs name files the tree does not have: " + "; ".join(stale)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces as hyphens."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "broken links: " + "; ".join(broken)


EVENT = re.compile(r"^event (\w+):\n((?:[ \t]+\S.*\n)+)", re.M)
FIELD = re.compile(r"^\s+(\w+): (.+?)\s*(?:#.*)?$")
HEADER_WORDS = int(re.search(r"^HEADER_WORDS: constant\(uint256\) = (\d+)$",
                             (REPO / "contracts" / "constants.vy").read_text(), re.M)[1])


def abi_type(vyper: str) -> str:
    """The ABI type of a Vyper event field type, as a topic-0 signature spells it."""
    vyper = vyper.strip()
    if vyper.startswith("indexed("):
        return abi_type(vyper[len("indexed("):-1]) + " indexed"
    if vyper.startswith("Bytes["):
        return "bytes"
    if vyper.startswith("String["):
        return "string"
    if vyper.startswith("DynArray["):
        return abi_type(vyper[len("DynArray["):].split(",")[0]) + "[]"
    if vyper == "bytes32[HEADER_WORDS]":
        return f"bytes32[{HEADER_WORDS}]"
    return vyper


def event_signatures() -> list[str]:
    """Every event the contracts declare, as `Name(type [indexed] field, ...)`."""
    out = set()
    for src in (REPO / "contracts").glob("*.vy"):
        for name, body in EVENT.findall(src.read_text()):
            fields = [FIELD.match(line) for line in body.splitlines()]
            out.add(f"{name}(" + ", ".join(f"{abi_type(m[2])} {m[1]}"
                                          for m in fields if m) + ")")
    return sorted(out)


def test_every_contract_event_is_in_interop_with_its_types_and_indexed_fields() -> None:
    text = (REPO / "docs" / "INTEROP.md").read_text()
    missing = [sig for sig in event_signatures() if f"`{sig}`" not in text]
    assert not missing, "docs/INTEROP.md §1.3 lacks these events as declared: " + "; ".join(missing)


def protocol_sections() -> set[str]:
    text = (REPO / "docs" / "PROTOCOL.md").read_text()
    return set(re.findall(r"(?m)^#{2,3} (\d+(?:\.\d+)?)\.? ", text))


def test_every_protocol_section_cited_exists() -> None:
    """`PROTOCOL.md §n.m` in code, tests and docs, and `§n.m` inside PROTOCOL.md, name a heading."""
    known = protocol_sections()
    cites = []
    for root in ("protocol", "miner", "validator", "benchmarks", "tests", "contracts", "docs"):
        for path in (REPO / root).rglob("*"):
            if path.suffix in (".py", ".vy", ".md") and path.is_file():
                body = path.read_text(errors="replace")
                own = path.name == "PROTOCOL.md"
                pattern = r"(?<!\.md )§(\d+(?:\.\d+)?)" if own else r"PROTOCOL\.md\)?,? §(\d+(?:\.\d+)?)"
                cites += [(path, n) for n in re.findall(pattern, body)]
    stale = sorted({f"{p.relative_to(REPO)}: §{n}" for p, n in cites if n.rstrip(".") not in known})
    assert not stale, "citations of PROTOCOL.md sections that do not exist: " + "; ".join(stale)


def test_readme_is_short_and_keeps_the_two_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "pip install torch==2.13.0 && pip install -e . && veritrain devnet\n" in readme
    assert "pip install -e '.[dev]' && python -m pytest\n" in readme
    assert "AGPL-3.0" in readme  # contracts/ compiles in snekmate's AGPL-3.0 modules
