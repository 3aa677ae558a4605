"""One module per benchmark item of issue 5; each exposes ``run(sizes, options) -> ItemResult``."""
