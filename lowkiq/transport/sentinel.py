"""A Sentinel-managed primary: ``redis+sentinel://[[user]:password@]host1:26379,host2:26379/<service>/<db>``.

The password authenticates to the data nodes; ``?sentinel_password=`` (and
``sentinel_username=``) to the sentinels, when they require one.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote

from redis.sentinel import Sentinel

SCHEME = "redis+sentinel://"
DEFAULT_PORT = 26379


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SCHEME)


@dataclass(frozen=True)
class SentinelTarget:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    def primary_url(self, host: str, port: int) -> str:
        """The URL of the data node Sentinel named, with the data nodes' credentials."""
        auth = ""
        if self.password is not None or self.username:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        return f"redis://{auth}{_host(host)}:{port}/{self.db}"

    def describe(self) -> str:
        sentinels = ",".join(f"{_host(h)}:{p}" for h, p in self.sentinels)
        return f"Sentinel service {self.service!r} via {sentinels}, db {self.db}"


def parse(url: str) -> SentinelTarget:
    if not is_sentinel_url(url):
        raise ValueError(f"not a Sentinel URL: {url!r}")
    rest, _, query = url[len(SCHEME) :].partition("?")
    location, _, path = rest.partition("/")
    userinfo, _, hosts = location.rpartition("@")
    username, _, password = userinfo.partition(":")
    parts = [unquote(p) for p in path.split("/") if p]
    if not hosts or not parts or len(parts) > 2:
        raise ValueError("a Sentinel URL is redis+sentinel://[:password@]host:26379[,host2:26379]/<service>[/<db>], "
                         f"got {_redacted(url)!r}")
    try:
        db = int(parts[1]) if len(parts) == 2 else 0
    except ValueError:
        raise ValueError(f"the database of {_redacted(url)!r} must be a number, got {parts[1]!r}") from None
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = set(options) - {"sentinel_password", "sentinel_username"}
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} in the Sentinel URL; "
                         "known: sentinel_password, sentinel_username")
    return SentinelTarget(
        sentinels=tuple(_address(h) for h in hosts.split(",")),
        service=parts[0],
        db=db,
        username=unquote(username) or None,
        password=unquote(password) if userinfo else None,
        sentinel_username=options.get("sentinel_username"),
        sentinel_password=options.get("sentinel_password"),
    )


def discover_primary(target: SentinelTarget, timeout: float) -> tuple[str, int]:
    """The primary's address as the sentinels know it now (raises MasterNotFoundError, a ConnectionError)."""
    sentinel_kwargs = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password  # type: ignore[assignment]
    if target.sentinel_username is not None:
        sentinel_kwargs["username"] = target.sentinel_username  # type: ignore[assignment]
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call,unused-ignore]
    try:
        host, port = sentinel.discover_master(target.service)  # type: ignore[no-untyped-call,unused-ignore]
    finally:
        for client in sentinel.sentinels:
            client.close()
    return str(host), int(port)


def _address(text: str) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [ipv6]:port
        host, _, port = text[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        return host, int(port) if port else DEFAULT_PORT
    except ValueError:
        raise ValueError(f"bad sentinel address {text!r}: expected host:port") from None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _redacted(url: str) -> str:
    _, at, tail = url.rpartition("@")
    return f"{SCHEME}***@{tail}" if at else url

