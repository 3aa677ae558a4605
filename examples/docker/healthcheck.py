"""A container's health check: exit status 0 when the URL answers 200, else 1.

    python healthcheck.py http://127.0.0.1:9108/healthz

Where LOWKIQ_WEB_PASSWORD is set (the console's container), it signs in as LOWKIQ_WEB_USER (default admin).
The slim image has no curl; Python is there.
"""

import base64
import os
import sys
import urllib.request


def main(url):
    request = urllib.request.Request(url)
    password = os.environ.get("LOWKIQ_WEB_PASSWORD")
    if password:
        credentials = f"{os.environ.get('LOWKIQ_WEB_USER', 'admin')}:{password}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(credentials).decode())
    try:
        with urllib.request.urlopen(request, timeout=4) as reply:
            return 0 if reply.status == 200 else 1
    except OSError as exc:  # refused, timed out, or an error status (HTTPError)
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
