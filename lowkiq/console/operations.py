"""Operators' actions on one worker's queue, as the pages, the API and the CLI offer them: one table.

``OPERATIONS`` act on the ids an operator selected, or on a whole area; each maps a URL path to an
``Actions`` method and says what it did, with a count. ``MATCHING`` act on the jobs a filter matches,
in two steps (count and ask, then act on exactly the jobs counted): each names its area and verb, the
``Actions`` method run on each chunk, what it asks and what it says it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..store.actions import Actions

# An operator selects at most a few pages of rows; bound the body anyway.
MAX_IDS = 10_000


@dataclass(frozen=True)
class Operation:
    path: str  # under /workers/<worker>/
    method: str  # of lowkiq.store.actions.Actions
    takes_ids: bool
    done: str  # what happened, {count} replaced

    @property
    def endpoint(self) -> str:
        return self.path.replace("/", "_")

    def run(self, actions: Actions, ids: Sequence[str]) -> int:
        method = getattr(actions, self.method)
        count: int = method(ids) if self.takes_ids else method()
        return count

    def message(self, count: int) -> str:
        jobs = f"{count:,} job" + ("" if count == 1 else "s")
        return self.done.format(jobs=jobs)


OPERATIONS: tuple[Operation, ...] = (
    Operation("morgue/requeue", "morgue_requeue", True, "Requeued {jobs} from the morgue."),
    Operation("morgue/delete", "morgue_delete", True, "Deleted {jobs} from the morgue."),
    Operation("morgue/requeue_all", "morgue_requeue_all", False, "Requeued all dead jobs: {jobs}."),
    Operation("morgue/delete_all", "morgue_delete_all", False, "Deleted all dead jobs: {jobs}."),
    Operation("enqueued/delete", "delete", True, "Deleted {jobs} from the queue."),
    Operation("perform_all_now", "perform_all_now", False, "{jobs} will run now."),
    Operation("kill_failed", "kill_failed", False, "Moved {jobs} that had failed to the morgue."),
    Operation("delete_failed", "delete_failed", False, "Deleted {jobs} that had failed."),
)
BY_ENDPOINT = {op.endpoint: op for op in OPERATIONS}

# A queued job's own "Retry now", on its page and in the API: the store's perform now, for that one id. As safe
# with leases as the other actions on ids: one short script on the id's shard that moves its perform_in in the
# queue to now, and nothing else; a batch in processing, its shard's lease and fencing token are not touched, so
# the id still runs only when the lease holder takes it (after the id's batch in processing, if any). Audited as
# "enqueued/perform_now" with the id. Not in OPERATIONS: its routes take one id, not a list.
RETRY_NOW = Operation("enqueued/perform_now", "perform_now", True, "{jobs} will run now.")


@dataclass(frozen=True)
class MatchingOperation:
    area: str  # "morgue" or "enqueued": the jobs the filter looks at
    verb: str  # in URLs, the API's "action" and the CLI
    method: str  # of lowkiq.store.actions.Actions, run on each chunk of the ids counted
    ask: str  # what the confirmation asks, {jobs} replaced ("3 dead jobs")
    done: str  # what happened, {jobs} replaced


MATCHING: tuple[MatchingOperation, ...] = (
    MatchingOperation("morgue", "requeue", "morgue_requeue", "Requeue {jobs}", "Requeued {jobs}"),
    MatchingOperation("morgue", "delete", "morgue_delete", "Delete {jobs} for good", "Deleted {jobs}"),
    MatchingOperation("enqueued", "delete", "delete", "Delete {jobs} for good", "Deleted {jobs}"),
    MatchingOperation("enqueued", "kill", "kill", "Move {jobs} to the morgue", "Moved {jobs} to the morgue"),
    MatchingOperation("enqueued", "perform_now", "perform_now",
                      "Make {jobs} ready now (those already due stay as they are)", "Made {jobs} ready now"),
)
MATCHING_BY_VERB = {(op.area, op.verb): op for op in MATCHING}
