"""`lowkiq-demo` (`make demo`): producer, server and console on an embedded Redis.

The embedded Redis keeps its data in ./.lowkiq, the server is
`lowkiq -r <lowkiq/demo/app.py>`, the console is `lowkiq web --app <lowkiq/demo/app.py>`.
Ctrl-C stops all of them.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .. import connection

APP = Path(__file__).with_name("app.py")
STATUSES = ["created", "paid", "packed", "shipped", "delivered"]
# Exit statuses of a child stopped by the signal the demo sends it (or Ctrl-C's).
STOPPED = {0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT}


def tool(name: str) -> list[str] | None:
    """A console script of this environment, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    return [found] if found else None


def produce(stop: threading.Event, rate: float) -> None:
    from lowkiq.demo import app as demo_app

    versions: dict[int, int] = {}
    while not stop.is_set():
        orders = []
        for order_id in random.sample(range(1, 2000), 8):
            for _ in range(random.randint(1, 6)):  # a burst of updates to one order
                v = versions[order_id] = versions.get(order_id, 0) + 1
                orders.append({"id": order_id, "score": v, "payload": {
                    "order": order_id, "version": v, "status": STATUSES[min(v - 1, 4)],
                    "amount": round(random.uniform(5, 500), 2)}})
        demo_app.OrderUpdates.perform_async(orders)
        demo_app.Emails.perform_async([{"id": f"mail-{random.randint(1, 300)}",
                                        "payload": {"to": f"user{random.randint(1, 300)}@example.com"}}
                                       for _ in range(3)])
        stop.wait(max(0.05, (len(orders) + 3) / rate))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lowkiq-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=5000, help="console port (default 5000)")
    parser.add_argument("--rate", type=float, default=200, help="payloads enqueued per second (default 200)")
    parser.add_argument("--report-every", type=float, default=10, metavar="SECONDS",
                        help="seconds between the server's failure and summary lines (default 10)")
    args = parser.parse_args(argv)

    # The demo is about the embedded Redis, in ./.lowkiq: a URL in the environment would send
    # it elsewhere, and the rule that puts it beside the app file would put it in lowkiq's own
    # folder. Every process below inherits this folder and so shares the one server.
    for name in ("LOWKIQ_REDIS_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    data = Path(connection.EMBEDDED_DIR).resolve()
    os.environ[connection.EMBEDDED_DIR_VARIABLE] = str(data)
    os.environ["LOWKIQ_DEMO_REPORT_EVERY"] = str(args.report_every)
    print(f"embedded Redis: {connection.embedded_url()}  (data in {data})", flush=True)

    lowkiq_cmd = tool("lowkiq") or [sys.executable, "-m", "lowkiq.cli"]
    commands = {
        "server": [*lowkiq_cmd, "-r", str(APP), "--poll-interval", "0.5"],
        # One gunicorn worker: the dashboard's chart samples live in its process.
        "console": [*lowkiq_cmd, "web", "--app", str(APP), "--bind", f"127.0.0.1:{args.port}",
                    "--workers", "1", "--threads", "4"],
    }
    # Sessions of their own: a terminal's Ctrl-C reaches only the demo, which then stops each
    # child with one SIGTERM (a server takes a second signal as "stop without waiting").
    children = [(name, subprocess.Popen(command, start_new_session=True)) for name, command in commands.items()]
    print("producing order updates and e-mails; Ctrl-C stops everything", flush=True)

    stop = threading.Event()
    # Handlers of its own for both: a shell that starts the demo in the background hands it
    # SIGINT ignored, and Python then never turns Ctrl-C (or kill -INT) into KeyboardInterrupt.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    producer = threading.Thread(target=produce, args=(stop, args.rate), name="producer", daemon=True)
    producer.start()
    while not stop.is_set() and all(p.poll() is None for _, p in children):
        stop.wait(0.5)
    stop.set()
    producer.join(5)
    for _, p in children:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    code = 0
    for name, p in children:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        if p.returncode not in STOPPED:
            print(f"{name} exited with {p.returncode}")
            code = 1
    connection.stop_embedded(data)
    print("demo stopped")
    return code
