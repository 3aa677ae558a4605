"""``lowkiq groups WORKER``, ``lowkiq groups pause|resume WORKER GROUP`` and ``lowkiq stats WORKER --day``: a
worker's groups (the tenant view) and one group's pause, and its wait and run times of a day; all through the
console model (``lowkiq.console.groups``, ``lowkiq.console.day_stats``), as the pages and the API.

Each command answers ``(data, text)``, what ``--json`` prints and how to draw it for people, which ops.py shows;
a mistake is a ``BadInput`` naming it (exit status 2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..console import day_stats
from ..console import groups as console_groups
from ..console.listing import BadInput
from . import human
from .human import Style

if TYPE_CHECKING:
    from ..console import Console

# The histogram's widest bar, in characters.
BAR = 40
GROUPS_USAGE = "lowkiq groups WORKER, or lowkiq groups pause|resume WORKER GROUP"
Answer = tuple[Any, Callable[[Style], str]]


def groups(c: Console, words: Sequence[str], *, who: str) -> Answer:
    if len(words) == 3 and words[0] in ("pause", "resume"):
        return _pause(c, words[0], words[1], words[2], who)
    if len(words) != 1:
        raise BadInput(f"{GROUPS_USAGE}: got {' '.join(words)!r}")
    view = c.worker(words[0])
    rows = console_groups.groups(c, view)
    data = {"worker": view.name, "groups": [row.as_json() for row in rows]}

    def text(style: Style) -> str:
        if not rows:
            return f"{view.name} has no grouped job queued or busy, and no paused group"
        return human.table(
            ["group", "queued", "busy", "oldest wait", "paused"],
            [[human.cell(r.name), human.count(r.queued), human.count(r.busy),
              human.duration(r.oldest_wait) if r.queued else "-",
              f"since {style.when(r.paused.at)} by {human.cell(r.paused.who)} ({r.paused.source})" if r.paused
              else "no"] for r in rows],
            right=("queued", "busy", "oldest wait"), last_unclipped=True)

    return data, text


def _pause(c: Console, verb: str, worker: str, group: str, who: str) -> Answer:
    view = c.worker(worker)
    change = console_groups.pause if verb == "pause" else console_groups.resume
    try:
        changed = change(c, view, group, who=who, source="cli")
    except (TypeError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    shown = human.cell(group)
    if verb == "pause":
        said = (f"group {shown} of {view.name} paused: its queued jobs wait, in order, while other groups run"
                if changed else f"group {shown} was paused already")
    else:
        said = f"group {shown} of {view.name} resumed: its jobs run again, in order" if changed else \
            f"group {shown} was not paused"
    return ({"worker": view.name, "group": group, "paused": verb == "pause", "changed": changed},
            lambda style: said)


def stats(c: Console, worker: str, day: str | None) -> Answer:
    view = c.worker(worker)
    measured = day_stats.read(c, view, day)
    data: dict[str, Any] = measured.as_json()
    labels = day_stats.bucket_labels()

    def text(style: Style) -> str:
        lines = [f"{view.name}, {measured.day} (UTC): jobs performed that day, by when their perform ended"]
        for kind, what in (("wait", "due to start"), ("run", "start to end")):
            m = getattr(measured, kind)
            lines.append("")
            if not m.count:
                lines.append(f"{kind} ({what}): no job")
                continue
            lines.append(f"{kind} ({what}): {human.count(m.count)} jobs, mean {seconds(m.mean)}, "
                         f"standard deviation {seconds(m.stddev)}")
            most = max(m.buckets)
            last = max(i for i, n in enumerate(m.buckets) if n)
            first = min(i for i, n in enumerate(m.buckets) if n)
            for label, n in list(zip(labels, m.buckets, strict=True))[first:last + 1]:
                bar = "#" * (round(BAR * n / most) if n else 0)
                lines.append(f"  {label:>9} {bar:<{BAR}} {human.count(n)}")
        return "\n".join(lines)

    return data, text


def seconds(value: float) -> str:
    """A time for people, fine below a second."""
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return human.duration(value) if value >= 10 else f"{value:.2f} s"
