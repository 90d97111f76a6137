"""Node logs as JSON lines when nobody reads them on a terminal (log shippers parse them),
and the familiar `time LEVEL logger message key=value` text when someone does.

One JSON object per event: `ts` (ISO-8601, UTC), `level`, `logger`, `event` (the message
without its `kv(...)` part), then each `kv` field as a JSON field, and `exc` (the traceback)
when the event carries an exception.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import sys
from datetime import UTC, datetime
from typing import IO, Any

from protocol.node.logs import Fields

LOG_FORMAT_ENV = "VERITRAIN_LOG_FORMAT"  # `--log-format`'s variable; a node sets it for the workers it spawns
HUMAN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
RESERVED = ("ts", "level", "logger", "event", "exc", "stack")  # a kv field by these names gets a "_" suffix


class LogFormat(enum.StrEnum):
    AUTO = "auto"  # JSON lines unless the stream is a terminal
    JSON = "json"
    TEXT = "text"


class JsonFormatter(logging.Formatter):
    """One line of JSON per record; see the module docstring for the fields."""

    def format(self, record: logging.LogRecord) -> str:
        event, fields = split_fields(record)
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "event": event,
        }
        for key, value in fields.items():
            out[f"{key}_" if key in RESERVED else key] = jsonable(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


def split_fields(record: logging.LogRecord) -> tuple[str, dict[str, Any]]:
    """(the message with every `kv(...)` argument left out, the fields of those arguments)."""
    if isinstance(record.msg, Fields):  # log.info(kv(...)): fields only
        return "", dict(record.msg.fields)
    args = record.args
    if not isinstance(args, tuple) or not any(isinstance(a, Fields) for a in args):
        return record.getMessage(), {}
    fields: dict[str, Any] = {}
    for arg in args:
        if isinstance(arg, Fields):
            fields.update(arg.fields)
    try:
        event = str(record.msg) % tuple("" if isinstance(a, Fields) else a for a in args)
    except (TypeError, ValueError):  # a `%d` where the fields go: keep the whole message
        return record.getMessage(), fields
    return event.strip(), fields


def jsonable(value: Any) -> Any:
    """`value` as JSON can hold it: numbers, strings, booleans and None as they are, lists and
    dicts item by item, anything else as the text the human format shows."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # NaN is not JSON
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return f"{value}"


def is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def formatter_for(stream: IO[str], fmt: LogFormat = LogFormat.AUTO) -> logging.Formatter:
    """`fmt`; for AUTO the human format on a terminal, JSON lines anywhere else (a file, a
    pipe, journald)."""
    text = fmt is LogFormat.TEXT or (fmt is LogFormat.AUTO and is_terminal(stream))
    return logging.Formatter(HUMAN_FORMAT) if text else JsonFormatter()


def stream_handler(stream: IO[str] | None = None, fmt: LogFormat = LogFormat.AUTO) -> logging.Handler:
    """A handler writing to `stream` (default stderr) in the format `formatter_for` picks."""
    stream = sys.stderr if stream is None else stream
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter_for(stream, fmt))
    return handler
