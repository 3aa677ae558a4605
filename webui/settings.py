"""The console's settings: what each one accepts, parsed strictly, read again on every request.

Each setting has one name, used both as the environment variable of the standalone
app and as the key of a host app's ``app.config``. Text from either is parsed with
the same rules as the runtime's own options (``lowkiq.options``): no surrounding
spaces, no ``nan``, nothing read some other way. A bad value raises ``SettingError``,
one line that names the setting and says what it accepts.

``boolean`` is the parser of yes/no settings; ``setting_value`` applies any parser to
a config value that may already be a Python bool or number. Both are meant to be shared
with the runtime's settings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import options
from ..options import BOOLEAN_HELP, boolean
from .hosts import allowed_hosts


class SettingError(ValueError):
    """A console setting with a value it does not accept; the message is one line naming it."""


def _within(parse: Callable[[str], float], low: float, high: float) -> Callable[[str], float]:
    def parse_within(text: str) -> float:
        value = parse(text)
        if not low <= value <= high:
            raise ValueError(f"expected a value from {low:g} to {high:g}")
        return value

    return parse_within


def _user(text: str) -> str:
    options.word(text)
    if ":" in text:
        raise ValueError("a basic-auth user name cannot contain ':'")
    return text


def origins(text: str) -> tuple[str, ...]:
    """Origins such as ``https://ops.example.com``, separated by commas or spaces."""
    found = tuple(o for o in text.replace(",", " ").split() if o)
    for origin in found:
        scheme, sep, rest = origin.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"expected origins like https://ops.example.com, got {origin!r}")
    return found


def _text(text: str) -> str:
    if not text:
        raise ValueError("it is set but empty")
    return text


@dataclass(frozen=True)
class Setting:
    name: str  # the environment variable and the app.config key
    field: str  # of ConsoleSettings
    parse: Callable[[str], Any]
    default: Any
    accepts: str  # for people: docs/console.md's settings table says the same


MIB = 1024 * 1024

SETTINGS: tuple[Setting, ...] = (
    Setting("LOWKIQ_WEB_PASSWORD", "password", _text, None, "any non-empty text"),
    Setting("LOWKIQ_WEB_USER", "user", _user, "admin", "a non-empty name, no ':' and no spaces around it"),
    Setting("LOWKIQ_WEB_READONLY", "readonly", boolean, False, BOOLEAN_HELP),
    Setting("LOWKIQ_WEB_SECRET_KEY", "secret_key", _text, None, "any non-empty text"),
    Setting("LOWKIQ_WEB_POLL_INTERVAL", "poll_interval", _within(options.number, 0.5, 3600), 3.0,
            "seconds, 0.5 to 3600"),
    Setting("LOWKIQ_WEB_REDIS_TIMEOUT", "redis_timeout", _within(options.number, 0.1, 60), 3.0, "seconds, 0.1 to 60"),
    Setting("LOWKIQ_WEB_MAX_CONTENT_LENGTH", "max_content_length", _within(options.integer, 1024, 1024 * MIB), MIB,
            "bytes, 1024 to 1073741824"),
    Setting("LOWKIQ_WEB_ALLOW_NO_AUTH", "allow_no_auth", boolean, False, BOOLEAN_HELP),
    Setting("LOWKIQ_WEB_STALE_AFTER", "stale_after", _within(options.number, 60, 365 * 86400), 86400.0,
            "seconds, 60 to 31536000"),
    Setting("LOWKIQ_WEB_TRUSTED_ORIGINS", "trusted_origins", origins, (),
            "origins like https://ops.example.com, separated by commas or spaces"),
    # Besides loopback names, which are always answered (see hosts.py: DNS rebinding).
    Setting("LOWKIQ_WEB_ALLOWED_HOSTS", "allowed_hosts", allowed_hosts, (),
            "host names or addresses like ops.example.com, comma-separated; ports are ignored"),
    # Off by default: one series per shard (24 shards x 50 workers) is a cost every scrape pays.
    Setting("LOWKIQ_WEB_METRICS_PER_SHARD", "metrics_per_shard", boolean, False, BOOLEAN_HELP),
    # 0 by default: X-Forwarded-* headers are trusted only when the operator says a proxy sets them.
    Setting("LOWKIQ_WEB_PROXIES", "proxies", _within(options.integer, 0, 5), 0, "a number of proxies, 0 to 5"),
)
BY_NAME = {s.name: s for s in SETTINGS}
SECRET_FIELDS = frozenset({"password", "secret_key"})


@dataclass(frozen=True)
class ConsoleSettings:
    """The console's settings at one moment; ``from_config`` builds them."""

    password: str | None
    user: str
    readonly: bool
    secret_key: str | bytes | None
    poll_interval: float
    redis_timeout: float
    max_content_length: int
    allow_no_auth: bool
    stale_after: float
    trusted_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    metrics_per_shard: bool
    proxies: int


def parse_text(setting: Setting, text: str, source: str = "environment variable") -> Any:
    """``text`` as ``setting`` accepts it, else SettingError naming the setting."""
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise SettingError(f"{source} {setting.name}={_shown(setting, text)} is not valid: {exc}") from None


def _shown(setting: Setting, value: Any) -> str:
    # A password or key never reaches a log, even a wrong one.
    return "<hidden>" if setting.field in SECRET_FIELDS and value else repr(value)


def setting_value(setting: Setting, value: Any) -> Any:
    """A host app's config value: text is parsed as from the environment; a bool or number is checked.

    None (or a key left out) is the default.
    """
    if value is None:
        return setting.default
    if isinstance(value, str):
        return parse_text(setting, value, "config key")
    takes_list = setting.parse in (origins, allowed_hosts)
    takes_text = setting.parse in (_text, _user) or takes_list
    if setting.parse is boolean:
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and not takes_text:
        if isinstance(value, int) or math.isfinite(value):
            return parse_text(setting, repr(value), "config key")
    elif isinstance(value, bytes) and setting.field == "secret_key" and value:
        return value
    elif isinstance(value, (list, tuple)) and takes_list:
        return parse_text(setting, ",".join(map(str, value)), "config key")
    raise SettingError(f"config key {setting.name}={_shown(setting, value)} is not valid: expected {setting.accepts}")


def from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The console settings the environment sets, parsed (for ``app.config``); a bad one raises SettingError."""
    return {s.name: parse_text(s, environ[s.name]) for s in SETTINGS if s.name in environ}


def from_config(config: Mapping[str, Any]) -> ConsoleSettings:
    """The settings a Flask app's config holds now (defaults for the keys it leaves out)."""
    return ConsoleSettings(**{s.field: setting_value(s, config.get(s.name)) for s in SETTINGS})
