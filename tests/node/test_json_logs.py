"""Node logs: JSON lines with the kv fields as fields off a terminal, the human format on one."""

from __future__ import annotations

import copy
import io
import json
import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from protocol.node.json_logs import LogFormat, formatter_for, stream_handler
from protocol.node.logs import kv


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("veritrain.test-json-logs")
    log.setLevel(logging.INFO)
    log.propagate = False  # only the handler a test adds sees its records
    yield log
    log.handlers.clear()


def _log_to(log: logging.Logger, stream: io.StringIO, fmt: LogFormat = LogFormat.AUTO) -> None:
    log.handlers.clear()
    log.addHandler(stream_handler(stream, fmt))


def test_kv_fields_become_json_fields(logger):
    out = io.StringIO()  # not a terminal
    _log_to(logger, out)
    logger.warning("fraud reported %s", kv(round=3, accused="0xabc", report=7, ok=True,
                                           scores={"0xa": 5, "0xb": 0}, segments=[1, 4]))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["event"] == "fraud reported"
    assert (line["level"], line["logger"]) == ("WARNING", "veritrain.test-json-logs")
    assert line["round"] == 3 and line["report"] == 7 and line["ok"] is True and line["accused"] == "0xabc"
    assert line["scores"] == {"0xa": 5, "0xb": 0} and line["segments"] == [1, 4]
    ts = datetime.fromisoformat(line["ts"])
    assert ts.utcoffset() is not None and ts.utcoffset().total_seconds() == 0
    assert abs((datetime.now(UTC) - ts).total_seconds()) < 60


def test_values_json_cannot_hold_are_written_as_the_human_format_shows_them(logger):
    out = io.StringIO()
    _log_to(logger, out)
    reason = ValueError("bad witness")
    logger.info("malformed bundle %s", kv(reason=reason, hash=b"\x01", loss=float("nan"), level="x"))
    line = json.loads(out.getvalue())  # strict JSON: no NaN token
    assert line["reason"] == "bad witness" and line["hash"] == "b'\\x01'" and line["loss"] == "nan"
    assert line["level"] == "INFO" and line["level_"] == "x"  # a field never hides the record's own


def test_a_message_without_kv_is_the_event_whole(logger):
    out = io.StringIO()
    _log_to(logger, out)
    logger.info("dropping %s: no longer bound", "peer-1")
    assert json.loads(out.getvalue())["event"] == "dropping peer-1: no longer bound"


def test_an_exception_is_a_field_of_its_one_line(logger):
    out = io.StringIO()
    _log_to(logger, out)
    try:
        raise RuntimeError("worker died")
    except RuntimeError:
        logger.exception("node crashed %s", kv(node="miner0"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["event"] == "node crashed" and line["node"] == "miner0" and line["level"] == "ERROR"
    assert line["exc"].startswith("Traceback") and "RuntimeError: worker died" in line["exc"]


def test_a_terminal_gets_the_human_format_and_anything_else_json(logger):
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty, os.fdopen(master, "rb", buffering=0) as screen:
        assert tty.isatty()
        logger.addHandler(stream_handler(tty))  # type: ignore[arg-type]
        logger.info("committed %s", kv(round=2, update="ab12"))
        tty.flush()
        shown = screen.read(4096).decode()
    assert "INFO veritrain.test-json-logs committed round=2 update=ab12" in shown
    assert not shown.lstrip().startswith("{")

    piped = io.StringIO()
    _log_to(logger, piped)
    logger.info("committed %s", kv(round=2, update="ab12"))
    assert json.loads(piped.getvalue())["update"] == "ab12"


def test_an_explicit_format_overrides_the_terminal_check():
    record = logging.LogRecord("veritrain.x", logging.INFO, __file__, 1, "published %s", (kv(round=1),), None)
    assert formatter_for(io.StringIO(), LogFormat.TEXT).format(record).endswith("INFO veritrain.x published round=1")
    assert json.loads(formatter_for(io.StringIO(), LogFormat.JSON).format(record))["round"] == 1


def test_kv_is_the_text_it_always_was_and_survives_a_copy():
    fields = kv(round=1, miner="0xa")
    assert fields == "round=1 miner=0xa" and f"x {fields}" == "x round=1 miner=0xa"
    copied = copy.deepcopy(fields)
    assert copied == fields and copied.fields == {"round": 1, "miner": "0xa"}
