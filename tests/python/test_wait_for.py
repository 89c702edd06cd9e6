"""`coscheduling.waiting.wait_for` (re-exported by conftest): the polling helper of the code and tests that watch
real processes."""

from __future__ import annotations

import time

import pytest

from conftest import WaitTimeout, wait_for


def test_returns_the_first_true_value_of_the_predicate() -> None:
    calls = iter([None, 0, [], {"n": 3}])
    assert wait_for(lambda: next(calls), 10, "a value", interval=0) == {"n": 3}


def test_a_timeout_fails_naming_what_was_awaited_and_the_last_value() -> None:
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.2 s waiting for the thing \(last value: \[\]\)"):
        wait_for(list, 0.2, "the thing")
    assert time.monotonic() - t0 >= 0.2


def test_the_description_is_computed_only_when_the_wait_fails() -> None:
    seen: list[int] = []
    assert wait_for(lambda: seen.append(1) or len(seen) >= 2, 10, lambda: seen.append(-1) or "x", interval=0)
    assert seen == [1, 1]
    with pytest.raises(WaitTimeout, match=r"waiting for records so far: \[1\] \(last value: None\)"):
        wait_for(lambda: seen.clear() or seen.append(1), 0, lambda: f"records so far: {seen}")


def test_the_predicate_is_asked_once_more_after_the_deadline() -> None:
    """A process kept off the CPU past the deadline still sees a condition that holds by then."""
    t0 = time.monotonic()
    # False until the deadline has passed; the polling interval is longer than the timeout.
    assert wait_for(lambda: time.monotonic() - t0 >= 0.1 or None, 0.1, "the deadline", interval=0.5)
