"""The Prometheus alert rules of docs/observability.md: valid YAML of Prometheus's rule-file shape, and every annotation
that shows ``$value`` formats it (a raw float such as ``2.9833333333333334`` reads as no count)."""

from __future__ import annotations

import re

import pytest
from docs_support import DOCS, section

yaml = pytest.importorskip("yaml")

PAGE = DOCS / "observability.md"
# What makes a sample's value read as people count it: Prometheus's template functions.
FORMATTED = re.compile(r"\{\{\s*\$value\s*\|\s*(humanize\w*|printf\s+\"%[^\"]*\")\s*\}\}")


def alert_rules() -> list[dict]:
    text = section("Prometheus: the console's `metrics` route", PAGE)
    [block] = [b for b in re.findall(r"```\n(.*?)```", text, re.S) if b.startswith("groups:")]
    return [rule for group in yaml.safe_load(block)["groups"] for rule in group["rules"]]


def test_every_alert_formats_its_value():
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} >= {"LowkiqLagging", "LowkiqMorgueGrowing"}
    for rule in rules:
        assert rule["expr"].strip()
        for text in rule.get("annotations", {}).values():
            shown = text.count("$value")
            assert len(FORMATTED.findall(text)) == shown, f"{rule['alert']}: $value shown raw in {text!r}"


def test_the_morgue_alert_reads_as_a_count():
    [morgue] = [rule for rule in alert_rules() if rule["alert"] == "LowkiqMorgueGrowing"]
    summary = morgue["annotations"]["summary"]
    assert '{{ $value | printf "%.0f" }} more dead jobs' in summary
