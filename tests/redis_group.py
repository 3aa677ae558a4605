"""Several redis-server processes started together by a test fixture, and stopped together by pid."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path


class ProcessGroup:
    def __init__(self, prefix: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix=prefix))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, port: int, command: list[str]) -> None:
        self.processes[port] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self, port: int) -> None:
        """kill -9 of the process listening on ``port``."""
        self.processes[port].send_signal(signal.SIGKILL)
        self.processes[port].wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)
