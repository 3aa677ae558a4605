"""The README as PyPI shows it: its relative links and images made absolute against the project's ``url``
(setup.cfg), since PyPI renders a description outside the repository. Everything else is in setup.cfg."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
# ![alt](target) or [text](target), the target up to ")" or a space (a title may follow)
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)")


def pypi_readme() -> str:
    config = configparser.ConfigParser()
    config.read(HERE / "setup.cfg")
    source = config["metadata"]["url"].rstrip("/")

    def absolute(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#", target):  # a scheme (https:, mailto:) or this page's anchor
            return match.group(0)
        kind = "raw" if bang else "blob"  # an image must be the file itself, a link may be the rendered page
        return f"{bang}[{text}]({source}/{kind}/main/{target.lstrip('./')}"

    return LINK.sub(absolute, (HERE / "README.md").read_text(encoding="utf-8"))


setup(long_description=pypi_readme(), long_description_content_type="text/markdown")
