"""The blank job RQ and Dramatiq run: importable by their worker processes."""


def blank(i):
    return None
