"""How a node process stops on SIGTERM or SIGINT: one log line, its children gone.

Before the event loop runs (start-up: keys, chain, hashes), the first signal raises `Stopped`
where the process is, so the `with` blocks holding a worker close it. Inside `trio.run`,
`run_until_stopped` receives the signals: the first cancels the node (its worker is closed by
`NodeContext.run`), a second one kills every descendant and exits at once. Afterwards
`reap_children` stops what multiprocessing left running (its resource tracker) and any straggler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType

import trio

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
REAP_WAIT_S = 3.0  # how long a child gets to exit by itself before it is killed


class Stopped(BaseException):
    """A stop signal arrived; a BaseException so that no `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 130 if self.signum == signal.SIGINT else 0  # Ctrl-C as shells report it; a requested stop is success


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    for sig in STOP_SIGNALS:  # a second signal while unwinding must not interrupt the clean-up
        signal.signal(sig, _exit_now)
    raise Stopped(signum)


def _exit_now(signum: int, _frame: FrameType | None) -> None:
    kill_descendants()
    os._exit(128 + signum)


def raise_on_stop_signals() -> None:
    """From now until the event loop takes over: a stop signal raises `Stopped`."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)


async def run_until_stopped(main: Callable[[], Awaitable[None]], log: logging.Logger) -> int | None:
    """Run `main` until it returns (None) or a stop signal cancels it (the signal's number)."""
    stopped: list[int] = []
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            node_scope = trio.CancelScope()

            async def watch() -> None:
                async for signum in signals:
                    if stopped:  # the second one: no more waiting for the clean-up
                        log.warning("stopping now: %s again", signal.Signals(signum).name)
                        kill_descendants()
                        os._exit(128 + signum)
                    stopped.append(signum)
                    log.info("stopping: %s", signal.Signals(signum).name)
                    node_scope.cancel()

            nursery.start_soon(watch)
            with node_scope:
                await main()
            nursery.cancel_scope.cancel()
    return stopped[0] if stopped else None


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (read from /proc: Linux)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command name (field 2) may hold spaces and parentheses: split after it
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


def descendants_of(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        found += kids
        todo += kids
    return found


def kill_descendants() -> None:
    for pid in descendants_of(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def reap_children(wait_s: float = REAP_WAIT_S) -> None:
    """Stop multiprocessing's resource tracker if this process started it, then give every
    other child `wait_s` to exit and kill what is left."""
    _stop_resource_tracker(wait_s)
    deadline = time.monotonic() + wait_s
    while (left := descendants_of(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


def _stop_resource_tracker(wait_s: float) -> None:
    # the tracker exits when every process holding its pipe closed it: ours is the last one
    # once the workers are gone (multiprocessing does this itself only at interpreter exit)
    from multiprocessing import resource_tracker, util

    # first what multiprocessing would run at interpreter exit: its semaphores unregister now,
    # while the tracker listens (later, each would start a new tracker that knows none of them)
    util._run_finalizers(0)  # type: ignore[attr-defined]
    tracker = resource_tracker._resource_tracker
    with _tracker_lock(tracker):
        fd, pid = getattr(tracker, "_fd", None), getattr(tracker, "_pid", None)
        if fd is None or pid is None:
            return
        os.close(fd)
        tracker._fd, tracker._pid = None, None  # type: ignore[attr-defined]
    deadline = time.monotonic() + wait_s
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.05)


@contextlib.contextmanager
def _tracker_lock(tracker: object) -> Iterator[None]:
    lock = getattr(tracker, "_lock", None)
    if lock is None:
        yield
        return
    with lock:
        yield
