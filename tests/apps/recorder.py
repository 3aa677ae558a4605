"""Test apps record what their workers did as JSON lines, one file per process.

Files, not Redis: a record must survive Redis outages and `kill -9`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

_lock = threading.Lock()
_file = None


def record(kind: str, **data: Any) -> None:
    global _file
    line = json.dumps({"kind": kind, "pid": os.getpid(), "thread": threading.current_thread().name,
                       "t": time.time(), **data})
    with _lock:
        if _file is None:
            folder = os.environ["APP_RECORD_DIR"]
            # One file per process, kept open for its whole life: a record costs one line-buffered write.
            _file = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        _file.write(line + "\n")
