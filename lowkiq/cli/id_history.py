"""``lowkiq jobs history ID`` for people: each worker's timeline of the id, oldest first as a log reads, one event
per line with where it ran, and each error (and traceback) on lines of its own (docs/history.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import human
from .human import Style


def text(histories: Sequence[dict[str, Any]], style: Style) -> str:
    """``histories``: what --json prints, one per worker (``Shown.as_json`` of lowkiq.console.histories)."""
    return "\n\n".join(_worker_text(h, style) for h in histories)


def _worker_text(h: dict[str, Any], style: Style) -> str:
    head = f"{h['worker']} · id {human.cell(h['id'], clip=False)} · shard {h['shard']}"
    note = f"{human.plural(len(h['events']), 'event')}, {human.count(h['examined'])} history entries examined"
    if not h["complete"]:
        note += "; older events not shown (--limit)"
    lines = [head, human.INDENT + note]
    for event in reversed(h["events"]):
        lines.append(f"{style.when(event['at'], precise=True)}  {human.cell(event['summary'], clip=False)}")
        where = []
        if event["server_name"]:
            where.append(f"server {event['server_name']}")
        if event["thread"]:
            where.append(f"thread {event['thread']}")
        if event["fencing_token"]:
            where.append(f"token {event['fencing_token']}")
        if where:
            lines.append(human.INDENT * 2 + ", ".join(human.cell(w, clip=False) for w in where))
        if event["perform_in"] is not None and event["kind"] == "failed":
            lines.append(human.INDENT * 2 + f"next try {style.when(event['perform_in'])}")
        if event["batch"]:
            more = event["batch_size"] - 1 - len(event["batch"])
            lines.append(human.INDENT * 2 + "with " + ", ".join(human.cell(i) for i in event["batch"])
                         + (f" and {human.count(more)} more" if more > 0 else ""))
        if event.get("raised"):
            lines.append(human.INDENT * 2 + "raised by " + ", ".join(
                "this id" if i == h["id"] else human.cell(i) for i in event["raised"]) + " (PartialFailure)")
        if event["error"]:
            lines.append(human.block(event["error"]))
        if event["traceback"]:
            lines.append(human.block(event["traceback"].rstrip()))
    return "\n".join(lines)
