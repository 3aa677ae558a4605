"""The attributes of "keeping ordered work flowing" are checked at class definition, naming the attribute."""

from __future__ import annotations

import pytest

import lowkiq


@pytest.mark.parametrize(("attrs", "error", "named"), [
    ({"time_limit": 0}, ValueError, "time_limit"),
    ({"time_limit": "1"}, TypeError, "time_limit"),
    ({"time_limit": float("inf")}, TypeError, "time_limit"),
    ({"time_limit_grace": -1}, ValueError, "time_limit_grace"),
    ({"time_limit_grace": None}, TypeError, "time_limit_grace"),
    ({"isolation": "fork"}, ValueError, "isolation"),
    ({"isolation": 1}, TypeError, "isolation"),
    ({"max_batches_per_child": 0}, ValueError, "max_batches_per_child"),
    ({"max_memory_per_child": 1.5}, TypeError, "max_memory_per_child"),
    ({"max_memory_per_child": True}, TypeError, "max_memory_per_child"),
    ({"morgue_policy": "newest"}, ValueError, "morgue_policy"),
])
def test_a_bad_value_names_its_attribute(attrs, error, named):
    with pytest.raises(error, match=rf"Bad\.{named}"):
        type("Bad", (lowkiq.Worker,), attrs)


def test_good_values_are_accepted_and_defaults_keep_lowkiqs_behaviour():
    good = type("Good", (lowkiq.Worker,), {"time_limit": 2.5, "isolation": "process", "time_limit_grace": 0,
                                            "max_batches_per_child": 100, "max_memory_per_child": 512,
                                            "morgue_policy": "whole_id"})
    assert good.time_limit == 2.5
    assert (lowkiq.Worker.time_limit, lowkiq.Worker.isolation, lowkiq.Worker.morgue_policy) == (
        None, "thread", "oldest_payload")


def test_partial_failure_takes_a_dict_of_exceptions():
    exc = lowkiq.PartialFailure({"a": KeyError("a")})
    assert isinstance(exc, lowkiq.LowkiqError) and set(exc.failures) == {"a"}
    with pytest.raises(TypeError):
        lowkiq.PartialFailure({})
    with pytest.raises(TypeError):
        lowkiq.PartialFailure({"a": "not an exception"})
    assert issubclass(lowkiq.TimeLimitExceeded, Exception) and issubclass(lowkiq.WorkerCrashed, lowkiq.LowkiqError)
