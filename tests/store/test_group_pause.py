"""Pausing one group (docs/fairness.md, "Pausing a group") in the take step: its ids stay queued in order while
the other groups and the default group flow; a resume serves them in order; pushes, retries and moves by
operators keep a paused group out of the rotation; a bad group name is refused."""

from __future__ import annotations

import pytest
from queue_support import held_lease, queue

import lowkiq
from lowkiq.console import groups as console_groups
from lowkiq.store import audit, group_pausing
from lowkiq.store.pausing import PAUSE, RESUME

T = 1_700_000_000.0


class OneShard(lowkiq.Worker):
    shards_count = 1
    batch_size = 1

    def perform(self, payloads_by_id):
        pass


class ThreeShards(lowkiq.Worker):
    shards_count = 3
    batch_size = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OneShard, ThreeShards])


def take_all(worker: type[lowkiq.Worker] = OneShard, shard: int = 0, limit: int = 1) -> list[str]:
    q = queue(worker)
    lease = held_lease(q, shard)
    order: list[str] = []
    acked: list[str] = []
    for _ in range(10_000):
        taken = q.ack_and_take((lease, acked) if acked else None, (lease, limit))
        assert taken is not None
        acked = [job.id for job in taken.jobs]
        if not acked:
            break
        order += acked
    return order


def set_paused(worker: type[lowkiq.Worker], group: str, verb: str) -> int:
    return group_pausing.set_paused(lowkiq.current().client, worker.keys(), group, verb, who="tester", source="cli")


def test_a_paused_groups_ids_wait_while_others_flow_and_a_resume_runs_them_in_order(clock):
    OneShard.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 100 + i} for i in range(5)])
    OneShard.perform_async([{"id": f"b{i}", "group": "B", "perform_in": T - 50 + i} for i in range(3)])
    OneShard.perform_async([{"id": f"d{i}", "perform_in": T - 40 + i} for i in range(2)])
    assert set_paused(OneShard, "A", PAUSE) == 1
    assert set_paused(OneShard, "A", PAUSE) == 0  # already
    OneShard.perform_async([{"id": "a9", "group": "A", "perform_in": T - 200}])  # a push keeps it out
    assert take_all() == ["b0", "d0", "b1", "d1", "b2"]
    assert set_paused(OneShard, "A", RESUME) == 1
    assert set_paused(OneShard, "A", RESUME) == 0
    assert take_all() == ["a9", "a0", "a1", "a2", "a3", "a4"]


def test_with_every_group_paused_nothing_grouped_is_taken_and_the_default_group_flows(clock):
    OneShard.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 10 + i} for i in range(3)])
    set_paused(OneShard, "A", PAUSE)
    assert take_all() == []
    OneShard.perform_async([{"id": "d0", "perform_in": T - 1}])  # an ungrouped id joins the rotation
    assert take_all() == ["d0"]
    set_paused(OneShard, "A", RESUME)
    assert take_all() == ["a0", "a1", "a2"]


def test_a_failed_id_of_a_paused_group_goes_back_and_waits(clock):
    OneShard.perform_async([{"id": "a0", "group": "A", "perform_in": T - 10}])
    OneShard.perform_async([{"id": "b0", "group": "B", "perform_in": T - 5}])
    q = queue(OneShard)
    lease = held_lease(q, 0)
    taken = q.ack_and_take(None, (lease, 1))
    assert [j.id for j in taken.jobs] == ["a0"]
    set_paused(OneShard, "A", PAUSE)  # a busy id finishes; its retry waits with its group
    q.fail(lease, [("a0", T - 1)], b"boom", 3, now=T)
    taken = q.ack_and_take(None, (lease, 5))
    assert [j.id for j in taken.jobs] == ["b0"]
    taken = q.ack_and_take((lease, ["b0"]), (lease, 5))
    assert taken.jobs == []
    set_paused(OneShard, "A", RESUME)
    taken = q.ack_and_take(None, (lease, 5))
    assert [j.id for j in taken.jobs] == ["a0"]


def test_every_shard_holds_the_pause_and_the_listing_shows_it(clock):
    ThreeShards.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 30} for i in range(30)])
    ThreeShards.perform_async([{"id": f"b{i}", "group": "B", "perform_in": T - 10} for i in range(6)])
    assert set_paused(ThreeShards, "A", PAUSE) == 3
    taken = [i for shard in range(3) for i in take_all(ThreeShards, shard, limit=5)]
    assert sorted(taken) == sorted(f"b{i}" for i in range(6))
    c = lowkiq.console.Console(lowkiq.current().client, lambda: ([lowkiq.store.registry.info_of(ThreeShards)], []),
                               clock=clock)
    view = c.worker("ThreeShards")
    rows = {row.name: row for row in console_groups.groups(c, view)}
    assert rows["A"].queued == 30 and rows["A"].paused is not None and rows["A"].paused.who == "tester"
    assert rows["A"].oldest_wait == pytest.approx(30, abs=0.01)
    assert "B" not in rows  # none queued, none busy
    assert console_groups.resume(c, view, "A", who="ops", source="api")
    entry = audit.read(lowkiq.current().client, 1)[0]
    assert (entry.action, entry.who, entry.source, entry.worker, entry.scope) == (
        "group/resume", "ops", "api", "ThreeShards", "group A resumed")
    assert console_groups.paused(c, view) == {}


@pytest.mark.parametrize("bad, error", [("", ValueError), (None, ValueError), (7, TypeError),
                                        ("(other)", ValueError), ("a\nb", ValueError)])
def test_a_bad_group_is_refused_naming_it_and_nothing_is_written(bad, error, r):
    with pytest.raises(error, match="group"):
        set_paused(OneShard, bad, PAUSE)
    assert not r.keys("*paused_groups*")


def commands_of_one_take(r, q, lease) -> dict[str, int]:
    r.config_resetstat()
    taken = q.ack_and_take(None, (lease, 1))
    assert [j.id[0] for j in taken.jobs] == ["b"]
    q.ack_and_take((lease, [j.id for j in taken.jobs]), None)
    stats = r.info("commandstats")
    return {name: int(s["calls"]) for name, s in stats.items() if not name.startswith("cmdstat_config")}


def test_the_take_passes_a_paused_group_over_at_no_cost_however_many_ids_it_holds(clock, r):
    """Bounded work: a paused group is out of the rotation, so a take runs the same Redis commands beside 10
    paused ids and beside 20,000, and beside 500 paused groups (a walk past them would show as more reads)."""
    q = queue(OneShard)
    lease = held_lease(q, 0)
    OneShard.perform_async([{"id": f"a{i:05}", "group": "A", "perform_in": T - 500 + i / 1000} for i in range(10)])
    OneShard.perform_async([{"id": f"b{i}", "group": "B", "perform_in": T - 1} for i in range(10)])
    set_paused(OneShard, "A", PAUSE)
    commands_of_one_take(r, q, lease)  # the first take also drops the empty default group from the rotation
    few = commands_of_one_take(r, q, lease)
    for start in range(10, 20_000, 5000):
        OneShard.perform_async([{"id": f"a{i:05}", "group": "A", "perform_in": T - 500 + i / 1000}
                                for i in range(start, min(start + 5000, 20_000))])
    many = commands_of_one_take(r, q, lease)
    assert few == many, (few, many)
    # nor however many groups are paused
    OneShard.perform_async([{"id": f"g{i}", "group": f"g{i}", "perform_in": T - 400} for i in range(500)])
    for i in range(500):
        set_paused(OneShard, f"g{i}", PAUSE)
    assert commands_of_one_take(r, q, lease) == few


def test_a_pause_in_shards_without_groups_leaves_lowkiqs_path_alone(clock, r):
    """A group paused in a worker whose shards hold no grouped id writes only its own hash there: pushes and
    takes of ungrouped ids build no fairness index and take Lowkiq's path."""
    set_paused(OneShard, "A", PAUSE)
    OneShard.perform_async([{"id": f"d{i}", "perform_in": T - 10 + i} for i in range(3)])

    def kept() -> list[str]:
        return sorted(k.decode().split(":")[-1] for k in r.keys("lowkiq:v1:{OneShard:0}:*"))

    assert kept() == ["events", "ids_by_perform_in", "ids_lex", "paused_groups", "payloads"]
    assert take_all() == ["d0", "d1", "d2"]
    assert kept() == ["counters", "events", "lease", "paused_groups"]
