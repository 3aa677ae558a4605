"""`lowkiq-demo` (`make demo`): producer, server and console on an embedded Redis.

Everything runs in the current directory: the embedded Redis keeps its data
in ./.lowkiq, the server is `lowkiq -r <demo_app.py>`, the console is
gunicorn serving `lowkiq.webui:create_app()`. Ctrl-C stops all of them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

APP = Path(__file__).with_name("demo_app.py")
STATUSES = ["created", "paid", "packed", "shipped", "delivered"]


def tool(name: str) -> list[str] | None:
    """A console script of this environment, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    return [found] if found else None


def produce(stop: threading.Event, rate: float) -> None:
    from lowkiq import demo_app

    versions: dict[int, int] = {}
    sent = 0
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
        sent += len(orders) + 3
        stop.wait(max(0.05, (len(orders) + 3) / rate))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lowkiq-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=5000, help="console port (default 5000)")
    parser.add_argument("--rate", type=float, default=200, help="payloads enqueued per second (default 200)")
    args = parser.parse_args(argv)

    # The demo is about the embedded Redis: a URL in the environment would send it elsewhere.
    for name in ("LOWKIQ_REDIS_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    from lowkiq import connection

    url = connection.embedded_url()
    data = Path(connection.EMBEDDED_DIR).resolve()
    print(f"embedded Redis: {url}  (data in {data})")
    # The children get the URL itself, and gunicorn runs from the data folder: it puts
    # its directory first on sys.path, and in lowkiq's own repository the source tree
    # there would hide the installed lowkiq.webui.
    env = {**os.environ, "LOWKIQ_APP": str(APP), "LOWKIQ_REDIS_URL": url}
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    lowkiq_cmd = tool("lowkiq") or [sys.executable, "-m", "lowkiq.cli"]
    children.append(("server", subprocess.Popen([*lowkiq_cmd, "-r", str(APP), "--poll-interval", "0.5"], env=env)))
    gunicorn = tool("gunicorn")
    if gunicorn and importlib.util.find_spec("lowkiq.webui") is not None:
        children.append(("console", subprocess.Popen(
            [*gunicorn, "--bind", f"127.0.0.1:{args.port}", "--threads", "4", "lowkiq.webui:create_app()"],
            env=env, cwd=data)))
        print(f"console: http://127.0.0.1:{args.port}/")
    else:
        print("console: not started (install lowkiq[web] for gunicorn)")
    print("producing order updates and e-mails; Ctrl-C stops everything")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    producer = threading.Thread(target=produce, args=(stop, args.rate), name="producer", daemon=True)
    producer.start()
    try:
        while not stop.is_set() and all(p.poll() is None for _, p in children):
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
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
        if p.returncode not in (0, -signal.SIGTERM):
            print(f"{name} exited with {p.returncode}")
            code = 1
    connection.stop_embedded()
    print("demo stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
