"""What the tests of the Prometheus scrape share: reading a scrape, and the metric names the docs use."""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

SECURITY_HEADERS = ("Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy")


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(http: Any, path: str = "/lowkiq/metrics", **kwargs: Any) -> Samples:
    reply = http.get(path, **kwargs)
    assert reply.status_code == 200, reply.data
    assert reply.headers["Content-Type"] == CONTENT_TYPE_LATEST
    assert reply.headers["Cache-Control"] == "no-store"
    assert all(reply.headers.get(h) for h in SECURITY_HEADERS)
    return samples(reply.get_data(as_text=True))


def served_names(text: str) -> set[str]:
    """The metric names a scrape offers, as PromQL writes them (counters with _total)."""
    return {f.name + ("_total" if f.type == "counter" else "") for f in text_string_to_metric_families(text)}


def readme_metric_names(heading: str) -> set[str]:
    """The metric names the documentation's section under ``heading`` uses (docs/observability.md)."""
    from docs_support import DOCS, section

    text = section(heading, DOCS / "observability.md")
    return set(re.findall(r"(?<![/\w])lowkiq_[a-z_]+", text))  # not a file name such as /etc/.../lowkiq_password
