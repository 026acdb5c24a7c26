"""The server's log settings, changed at run time through Triton's logging extension (``GET/POST /v2/logging``,
gRPC ``LogSettings``).

Settings (Triton's names and types): ``log_info``, ``log_warnings``, ``log_errors`` (bool: whether INFO, WARNING and
ERROR messages are written), ``log_verbose_level`` (uint32: verbose messages of level <= it; 0 = none),
``log_format`` (``default``: ``I1206 00:09:11.123456 4242 serve] text``, as Triton's glog-style lines;
``ISO8601``: ``2026-12-06T00:09:11Z I 4242 serve] text``) and ``log_file`` (read-only here: ``""``, the
server's stderr; a client may not point the server's writes at a path, which Triton also stopped allowing).

The switches act on the ``inferperf.serve`` logger through a filter on the logger itself, so every handler
(stderr in the CLI, a test's capture) sees the same lines; like the logger, they are the process's. Messages written: a model loaded or unloaded (INFO),
a repository model that cannot be served and ignored config fields (WARNING), a request answered 500 (ERROR),
and at verbose level 1 one line per infer request (model, status, server time; the hot path checks one
attribute when verbose is off).

Sources: triton-inference-server/server ``docs/protocol/extension_logging.md``; Triton's ``--log-format``
(``default`` / ``ISO8601``) in its command-line help.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

#: the logger the server writes to
LOGGER = logging.getLogger("inferperf.serve")
#: the settings and their types, as Triton reports them
FIELDS = {"log_file": str, "log_info": bool, "log_warnings": bool, "log_errors": bool, "log_verbose_level": int,
          "log_format": str}
FORMATS = ("default", "ISO8601")
VERBOSE = 5  # below DEBUG: verbose level N is logged at VERBOSE + 1 - N (level 1 at 5, level 2 at 4, ...)


class LogSettingsError(ValueError):
    """A log setting that cannot be applied (unknown name, wrong type, bad value): answer 400."""

    status = 400


class _Switches(logging.Filter):
    """The process's settings and the filter on :data:`LOGGER` that applies them."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, Any] = dict(DEFAULTS)
        self.verbose = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return bool(self.values["log_errors"])
        if record.levelno >= logging.WARNING:
            return bool(self.values["log_warnings"])
        if record.levelno >= logging.INFO:
            return bool(self.values["log_info"])
        return record.levelno >= VERBOSE + 1 - self.verbose if self.verbose else False


#: Triton's defaults
DEFAULTS = {"log_file": "", "log_info": True, "log_warnings": True, "log_errors": True, "log_verbose_level": 0,
            "log_format": "default"}
_SWITCHES = _Switches()
LOGGER.addFilter(_SWITCHES)


class LogSettings:
    """The log settings of this process, as a server's logging routes read and change them (see the module
    docstring). A logger is process-wide, so are they: a server starting resets them to Triton's defaults, and
    two servers in one process share them.

    Raises:
        LogSettingsError: from :meth:`update`.
    """

    def __init__(self) -> None:
        _SWITCHES.values = dict(DEFAULTS)
        self._apply()

    @property
    def values(self) -> dict[str, Any]:
        """Every setting, by Triton's names."""
        return dict(_SWITCHES.values)

    @property
    def verbose(self) -> int:
        """``log_verbose_level`` (read on the hot path)."""
        return _SWITCHES.verbose

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (all or nothing) and return every setting.

        Raises:
            LogSettingsError: an unknown name, a value of the wrong type (a bool is not a level), a negative
                level, a format not in :data:`FORMATS`, or a ``log_file`` other than the current one.
        """
        new = dict(_SWITCHES.values)
        for key, value in changes.items():
            kind = FIELDS.get(key)
            if kind is None:
                raise LogSettingsError(f"unknown log setting '{key}': use one of {', '.join(FIELDS)}")
            if kind is int and (type(value) is not int or value < 0):
                raise LogSettingsError(f"log setting '{key}' must be an integer >= 0, got {value!r}")
            if kind is not int and type(value) is not kind:
                raise LogSettingsError(f"log setting '{key}' must be a {'boolean' if kind is bool else 'string'}, "
                                       f"got {value!r}")
            if key == "log_format" and value not in FORMATS:
                raise LogSettingsError(f"log_format '{value}' is not one of {', '.join(FORMATS)}")
            if key == "log_file" and value != new["log_file"]:
                raise LogSettingsError("log_file cannot be changed through the logging API: the server writes to "
                                       "its stderr (redirect it when you start the server)")
            new[key] = value
        _SWITCHES.values = new
        self._apply()
        return self.values

    @staticmethod
    def _apply() -> None:
        verbose = _SWITCHES.verbose = _SWITCHES.values["log_verbose_level"]
        LOGGER.setLevel(max(1, VERBOSE + 1 - verbose) if verbose else logging.INFO)  # the cheap isEnabledFor gate
        for h in LOGGER.handlers:
            if isinstance(h.formatter, TritonFormatter):
                h.formatter.iso8601 = _SWITCHES.values["log_format"] == "ISO8601"

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is written under the current switches."""
        return _SWITCHES.filter(record)

    def close(self) -> None:
        """Back to Triton's defaults (a server that stopped)."""
        LogSettings()


class TritonFormatter(logging.Formatter):
    """Triton's line formats: ``default`` (glog: severity letter, MMDD, time with microseconds, pid) or ISO8601."""

    def __init__(self) -> None:
        super().__init__()
        self.iso8601 = False

    def format(self, record: logging.LogRecord) -> str:
        letter = {logging.ERROR: "E", logging.WARNING: "W", logging.INFO: "I"}.get(record.levelno, "V")
        if record.levelno >= logging.CRITICAL:
            letter = "E"
        t = record.created
        if self.iso8601:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            return f"{stamp} {letter} {os.getpid()} serve] {record.getMessage()}"
        micro = int((t % 1) * 1e6)
        return f"{letter}{time.strftime('%m%d %H:%M:%S', time.gmtime(t))}.{micro:06d} {os.getpid()} serve] " \
               f"{record.getMessage()}"


def log_to_stderr() -> logging.Handler:
    """Write :data:`LOGGER`'s lines to stderr in Triton's format (the CLI's ``serve``); returns the handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TritonFormatter())
    LOGGER.addHandler(handler)
    LOGGER.propagate = False
    LogSettings._apply()  # the format in force
    return handler


__all__ = ["FIELDS", "FORMATS", "LOGGER", "VERBOSE", "LogSettings", "LogSettingsError", "TritonFormatter", "log_to_stderr"]
