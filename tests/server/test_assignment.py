"""The shard assignment every server process computes alike from the live members."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from lowkiq.server.assignment import MemberView, assign, split_among_threads

QUEUES = (("orders", 24),)


def members(n: int, threads: int = 5, queues=QUEUES, prefix: str = "m") -> list[MemberView]:
    return [MemberView(f"{prefix}{i}", threads, queues) for i in range(n)]


def counts(owner: dict) -> Counter:
    return Counter(owner.values())


def test_every_shard_goes_to_exactly_one_member_and_counts_are_within_one_of_the_fair_share():
    for n in range(1, 8):
        owner = assign(members(n))
        assert sorted(owner) == [("orders", i) for i in range(24)]
        share = 24 / n
        assert all(abs(c - share) < 1 for c in counts(owner).values()), (n, counts(owner))
        assert len(counts(owner)) == min(n, 24)


def test_the_answer_does_not_depend_on_the_order_members_are_seen_in():
    group = members(4)
    assert assign(group) == assign(list(reversed(group)))


def test_threads_weigh_the_shares():
    owner = assign([MemberView("big", 6, QUEUES), MemberView("small", 2, QUEUES)])
    assert counts(owner) == {"big": 18, "small": 6}


@pytest.mark.parametrize("shards", [24, 120])
def test_a_join_or_a_leave_moves_about_one_nth_of_the_shards(shards):
    # The minimum is S/3 (what the newcomer gets, or what the leaver had); exact quotas cost a few
    # more when the newcomer's favourite shards come unevenly from the others (measured: at most
    # +3 of 24 and +10 of 120 over 200 random member sets).
    queues = (("orders", shards),)
    for trial in range(30):
        group = members(3, queues=queues, prefix=f"t{trial}-")
        two, three = assign(group[:2]), assign(group)
        moved_on_join = sum(two[s] != three[s] for s in three)
        after_leave = assign(group[1:])
        moved_on_leave = sum(three[s] != after_leave[s] for s in three)
        ideal = math.ceil(shards / 3)
        assert moved_on_join <= ideal + max(3, shards // 10), (trial, moved_on_join)
        assert moved_on_leave <= ideal + max(3, shards // 10), (trial, moved_on_leave)


def test_draining_members_get_nothing_and_a_lone_draining_member_leaves_shards_unassigned():
    group = members(2)
    leaving = MemberView("m1", 5, QUEUES, draining=True)
    owner = assign([group[0], leaving])
    assert set(owner.values()) == {"m0"} and len(owner) == 24
    assert assign([leaving]) == {}


def test_members_only_get_shards_of_queues_they_run():
    a = MemberView("a", 5, (("orders", 4),))
    b = MemberView("b", 5, (("orders", 4), ("mail", 4)))
    owner = assign([a, b])
    assert all(owner[("mail", i)] == "b" for i in range(4))
    assert len(owner) == 8


def test_node_hints_give_each_member_its_lowkiq_part():
    queues = (("a", 4), ("b", 3))
    group = [MemberView("x", 2, queues, hint=(2, 0)), MemberView("y", 2, queues, hint=(2, 1))]
    owner = assign(group)
    listed = [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("b", 2)]
    assert {s for s, m in owner.items() if m == "x"} == set(listed[0::2])
    assert {s for s, m in owner.items() if m == "y"} == set(listed[1::2])


def test_conflicting_hints_never_leave_a_shard_unassigned_nor_give_it_twice():
    queues = (("a", 6),)
    same = [MemberView("x", 2, queues, hint=(2, 0)), MemberView("y", 2, queues, hint=(2, 0))]
    assert sorted(assign(same)) == [("a", i) for i in range(6)]
    mixed = [MemberView("x", 2, queues, hint=(2, 0)), MemberView("y", 2, queues, hint=(3, 0))]
    assert sorted(assign(mixed)) == [("a", i) for i in range(6)]


def test_a_stable_name_brings_a_restarted_process_its_shards_back():
    before = [MemberView("pod-a-1", 5, QUEUES, stable_name="pod-a"), MemberView("pod-b-1", 5, QUEUES, stable_name="pod-b")]
    after = [MemberView("pod-a-2", 5, QUEUES, stable_name="pod-a"), before[1]]
    first, second = assign(before), assign(after)
    assert {s for s, m in first.items() if m == "pod-a-1"} == {s for s, m in second.items() if m == "pod-a-2"}


def test_threads_keep_their_shards_and_new_ones_go_to_the_least_loaded():
    shards = [("q", i) for i in range(6)]
    first = split_among_threads(shards, {}, 3)
    assert Counter(first.values()) == {0: 2, 1: 2, 2: 2}
    grown = split_among_threads([*shards, ("q", 6), ("q", 7)], first, 3)
    assert all(grown[s] == first[s] for s in shards)
    shrunk = split_among_threads(shards[:2], grown, 3)
    assert all(shrunk[s] == first[s] for s in shards[:2])
    # a thread holding more than its share gives the excess to the others
    lopsided = split_among_threads(shards, {s: 0 for s in shards}, 3)
    assert Counter(lopsided.values()) == {0: 2, 1: 2, 2: 2}


def test_a_process_warns_when_another_has_its_node_number_name_or_another_shards_count(configure, caplog):
    import logging

    import lowkiq
    from lowkiq.server.keeper import Keeper
    from lowkiq.store.membership import Member

    class Orders(lowkiq.Worker):
        shards_count = 4
        queue_name = "orders"

        def perform(self, payloads_by_id):
            pass

    runtime = configure(workers=[Orders], number_of_nodes=2, node_number=0, member_name="pod-a")
    keeper = Keeper(runtime, [])

    def member(member_id: str, hint, name: str, shards: int) -> Member:
        return Member(member_id, "h", 1, 2, "", 0, "running", (("orders", shards),), hint, name, {}, 0, 0)

    me = member(keeper.member_id, (2, 0), "pod-a", 4)
    with caplog.at_level(logging.WARNING, logger="lowkiq.server"):
        keeper.warn_about_twins([me, member("other", (2, 1), "pod-b", 4)])
        assert caplog.text == ""
        keeper.warn_about_twins([me, member("twin", (2, 0), "pod-a", 6)])
    assert "also started with --nodes 2 --node-number 0" in caplog.text
    assert "the same member name 'pod-a'" in caplog.text
    assert "queue 'orders' has 4 shards here but 6" in caplog.text
