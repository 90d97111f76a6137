"""DNS-AID in the node shell: the registry snapshot `veritrain dns-aid records` publishes,
and the extra dial source `--discover DOMAIN` adds. DNS is only a hint: whatever it says is
checked against the registry view the node already keeps (dns_confirm), and any failure of
DNS is logged while the node carries on with the registry alone."""

from __future__ import annotations

import logging
from functools import partial

import trio

from protocol.chain.client import ChainClient
from protocol.config.run_setup import training_spec
from protocol.core.crypto.keccak import checksum_address
from protocol.core.hardware.hardware_class import classes_in
from protocol.core.hardware.replay_profile import class_id
from protocol.core.settlement.class_checks import effective_classes
from protocol.node.chain_port import ChainPort
from protocol.node.logs import kv
from protocol.node.registry_sync import RegistrySync
from protocol.p2p.dns_confirm import confirm
from protocol.p2p.dns_resolve import DiscoveryConfig, discover
from protocol.p2p.dns_zone import zone_fragment
from protocol.p2p.errors import DnsAidError, P2PError
from protocol.p2p.node import P2PNode
from protocol.p2p.registry import RegistryView

DIAL_TIMEOUT_S = 10.0  # per confirmed hint; the reconnecting dialer retries later anyway


def registry_snapshot(client: ChainClient, log: logging.Logger) -> RegistryView:
    """The registry as a node would see it now: every valid binding with its eligibility
    (the same code path as a running node's RegistrySync, run once)."""
    view = RegistryView(client.handle.chain_id, bytes.fromhex(client.staking.address[2:]))
    trio.run(RegistrySync(ChainPort(client, log), view, log).refresh)
    return view


def records(client: ChainClient, domain: str, log: logging.Logger) -> str:
    """The zone fragment for every eligible registered node of `client`'s deployment: each
    with the hardware class it registered on chain (the first, for a validator holding
    several; class 0 when unset). The chain records no throughput, so it is published as 0,
    "unknown"."""
    spec = training_spec(client.deployment.run_config)
    entries = list(registry_snapshot(client, log).entries())
    classes = {}
    for entry in entries:
        mask = effective_classes(client.read.staking.hardware_classes(checksum_address(entry.account)))
        held = classes_in(spec.classes, mask)
        if held:
            classes[entry.account] = bytes(class_id(held[0]))
    return zone_fragment(entries, domain, bytes(class_id(spec.profile)), classes=classes)


async def dial_dns_hints(p2p: P2PNode, registry: RegistryView, domain: str,
                         config: DiscoveryConfig, log: logging.Logger) -> int:
    """Resolve `domain`, dial the hints the registry confirms; returns how many were dialled."""
    try:
        # blocking dnspython in a thread; its own budget (DiscoveryConfig.budget_s) bounds it
        found = await trio.to_thread.run_sync(partial(discover, domain, config))
    except DnsAidError as exc:
        log.warning("dns discovery failed %s", kv(domain=domain, reason=exc))
        return 0
    for label, problem in found.problems:
        log.warning("dns record ignored %s", kv(domain=domain, label=label, reason=problem))
    confirmed, ignored = confirm(found.hints, registry)
    for miss in ignored:
        log.warning("dns hint ignored %s", kv(label=miss.hint.label, peer=miss.hint.peer_id,
                                                addr=miss.hint.addr, reason=miss.reason))
    dialled = 0
    for hint in confirmed:
        if hint.peer_id == str(p2p.peer_id):
            continue
        try:
            with trio.fail_after(DIAL_TIMEOUT_S):
                await p2p.connect(f"{hint.addr}/p2p/{hint.peer_id}")
            dialled += 1
        except (P2PError, trio.TooSlowError, OSError) as exc:
            log.info("dns hint not reachable %s", kv(peer=hint.peer_id, addr=hint.addr, reason=exc))
    log.info("dns discovery done %s", kv(domain=domain, hints=len(found.hints),
                                          confirmed=len(confirmed), dialled=dialled))
    return dialled
