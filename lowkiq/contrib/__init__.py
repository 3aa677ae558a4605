"""Optional integrations, each installed with its own extra (``pip install lowkiq[opentelemetry]``)."""
