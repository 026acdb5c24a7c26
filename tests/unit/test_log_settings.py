"""Triton's logging extension (issue 41 item 5): the settings, their checks, and the switches that decide which
lines the server writes."""

from __future__ import annotations

import logging

import pytest

from inferperf.serve.log_settings import LOGGER, VERBOSE, LogSettings, LogSettingsError, TritonFormatter


@pytest.fixture()
def settings():
    s = LogSettings()
    try:
        yield s
    finally:
        s.close()


def _written(settings: LogSettings, level: int) -> bool:
    return LOGGER.isEnabledFor(level) and settings.filter(logging.LogRecord("inferperf.serve", level, "", 0, "x",
                                                                            None, None))


def test_defaults_are_tritons(settings: LogSettings) -> None:
    assert settings.values == {"log_file": "", "log_info": True, "log_warnings": True, "log_errors": True,
                               "log_verbose_level": 0, "log_format": "default"}
    assert _written(settings, logging.INFO) and not _written(settings, VERBOSE)


def test_each_switch_turns_its_level_off_and_verbose_levels_nest(settings: LogSettings) -> None:
    settings.update({"log_info": False})
    assert not _written(settings, logging.INFO) and _written(settings, logging.WARNING)
    settings.update({"log_warnings": False, "log_errors": False})
    assert not _written(settings, logging.WARNING) and not _written(settings, logging.ERROR)
    assert settings.update({"log_verbose_level": 1})["log_verbose_level"] == 1
    assert _written(settings, VERBOSE) and not _written(settings, VERBOSE - 1)  # level 2 lines need level 2
    settings.update({"log_verbose_level": 2})
    assert _written(settings, VERBOSE - 1)
    settings.update({"log_verbose_level": 0})
    assert not _written(settings, VERBOSE)


@pytest.mark.parametrize(("changes", "text"), [({"log_level": 1}, "unknown log setting 'log_level'"),
                                               ({"log_info": 1}, "'log_info' must be a boolean"),
                                               ({"log_verbose_level": True}, "must be an integer >= 0"),
                                               ({"log_verbose_level": -1}, "must be an integer >= 0"),
                                               ({"log_format": "json"}, "not one of default, ISO8601"),
                                               ({"log_file": "/tmp/x.log"}, "log_file cannot be changed"),
                                               ({"log_info": False, "log_format": 3}, "must be a string")])
def test_a_bad_setting_is_refused_and_nothing_changes(settings: LogSettings, changes: dict, text: str) -> None:
    before = dict(settings.values)
    with pytest.raises(LogSettingsError, match=text):
        settings.update(changes)
    assert settings.values == before  # all or nothing


def test_both_line_formats() -> None:
    f = TritonFormatter()
    rec = logging.LogRecord("inferperf.serve", logging.WARNING, "", 0, "hello %s", ("x",), None)
    rec.created = 1733443751.25  # 2024-12-06 00:09:11.25 UTC
    assert f.format(rec).startswith("W1206 00:09:11.250000 ") and f.format(rec).endswith(" serve] hello x")
    f.iso8601 = True
    assert f.format(rec).startswith("2024-12-06T00:09:11Z W ")
