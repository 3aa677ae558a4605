"""What the tests of the `lowkiq` command share: its one-line errors."""

from __future__ import annotations


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lowkiq: ")
    return lines[0]
