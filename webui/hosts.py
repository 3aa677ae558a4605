"""Which ``Host`` names the standalone console answers, against DNS rebinding.

A console without a password on 127.0.0.1 is safe from other machines, but not from
the operator's own browser: a page on ``rebind.attacker.test`` can make its name resolve
to 127.0.0.1, and its scripts then read and post to the console as the same origin
(``Origin`` and ``Sec-Fetch-Site`` both agree, so they do not help). What gives it away
is the ``Host`` header, which names the attacker's domain. So the standalone console
without a password answers only loopback names (``localhost``, ``*.localhost``,
127.0.0.0/8, ``::1``) and the names in ``LOWKIQ_WEB_ALLOWED_HOSTS``; with a password
it checks the list only when one is set. A mounted blueprint leaves ``Host`` to its
host app (Flask's ``TRUSTED_HOSTS``).
"""

from __future__ import annotations

import ipaddress
import re

# A DNS name (labels of letters, digits, "-" and "_") or an IPv4 address; IPv6 is parsed apart.
NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
LOOPBACK_NAMES = "localhost, *.localhost, 127.0.0.0/8, [::1]"


def host_name(host: str) -> str | None:
    """The name in a ``Host`` value, lower case, without port, brackets or a final dot; None if none is there.

    ``Example.COM:8000`` -> ``example.com``; ``[::1]:80`` -> ``::1``; ``::1`` -> ``::1``.
    """
    text = host.strip().lower()
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not _is_port(rest)):
            return None
        return _ipv6(inside)
    if text.count(":") > 1:  # a bare IPv6 address: no port can follow it
        return _ipv6(text)
    name, colon, port = text.partition(":")
    if colon and not _is_port(":" + port):
        return None
    if name.endswith("."):  # the fully qualified form of the same name
        name = name[:-1]
    return name if NAME.match(name) else None


def _is_port(text: str) -> bool:
    return len(text) > 1 and text[0] == ":" and text[1:].isascii() and text[1:].isdigit() and len(text) <= 6


def _ipv6(text: str) -> str | None:
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        return None


def is_loopback(name: str) -> bool:
    """``localhost``, a name under ``.localhost`` (RFC 6761: never leaves the machine), or a loopback address."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(text: str) -> tuple[str, ...]:
    """``LOWKIQ_WEB_ALLOWED_HOSTS``: names or addresses, comma-separated, ports ignored, any case."""
    found = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name = host_name(item)
        if name is None:
            raise ValueError(f"expected host names or addresses like ops.example.com or 10.0.0.5, got {item!r}")
        found.append(name)
    return tuple(found)


def is_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a ``Host`` value names loopback or one of ``allowed`` (as ``allowed_hosts`` returns them)."""
    name = host_name(host)
    return name is not None and (is_loopback(name) or name in allowed)


def refusal(host: str, has_password: bool) -> str:
    """What a refused request is told: which host, why, and how to allow it."""
    shown = host if len(host) <= 100 else host[:100] + "…"
    why = ("this console has no password, so it answers only loopback names" if not has_password
           else "this console answers only loopback names")
    return (f"Host {shown!r} is not allowed: {why} ({LOOPBACK_NAMES}) and those in LOWKIQ_WEB_ALLOWED_HOSTS, "
            "against DNS rebinding. To reach it by this name, add the name to LOWKIQ_WEB_ALLOWED_HOSTS "
            "(comma-separated; ports are ignored).")
