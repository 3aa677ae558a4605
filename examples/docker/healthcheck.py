"""A container's health check: exit status 0 when the URL answers 200, else 1. The slim image has no curl.

    python healthcheck.py http://127.0.0.1:9108/healthz
"""

import sys
import urllib.request


def main(url):
    try:
        with urllib.request.urlopen(url, timeout=4) as reply:
            return 0 if reply.status == 200 else 1
    except OSError as exc:  # refused, timed out, or an error status (HTTPError)
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
