"""The ops CLI's subcommands, named apart from lowkiq/cli/ops.py: `lowkiq --help` lists them and routes
them without importing ops, and ops takes their help from here."""

from __future__ import annotations

# Subcommands of the ops CLI (lowkiq/cli/ops.py) and what each does, kept here so that starting a server
# never imports it; `lowkiq --help` lists them, and ops.py's own help says the same.
COMMANDS = {
    "stats": "every worker's numbers and the live servers; with WORKER, its wait and run times of a UTC day (--day)",
    "servers": "live server processes and the shards each holds",
    "jobs": "find a job by id (jobs find ID), its history (jobs history ID), the ids that carry a tag (jobs "
            "tagged TAG), list a worker's queued, busy or dead jobs (jobs list WORKER), its hot ids (jobs hot "
            "WORKER), or stop a process-isolated perform (jobs stop WORKER ID)",
    "morgue": "requeue or delete dead jobs: by id, by filter or all, with a dry run first",
    "pause": "stop servers taking a worker's jobs (enqueueing goes on)",
    "resume": "let servers take a paused worker's jobs again",
    "schedules": "recurring schedules: list them, or pause, resume or run one now",
    "audit": "the newest operator actions",
    "groups": "a worker's groups: queued, busy, oldest wait, paused (groups WORKER); or pause or resume one "
              "(groups pause|resume WORKER GROUP)",
}
OPS_COMMANDS = tuple(COMMANDS)
