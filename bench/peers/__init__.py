"""Item 4's asyncio peers: saq, streaq, arq and taskiq (Redis broker), each in its own worker process.

Every ``<lib>_app`` module is imported both by the worker and by a producer
subprocess (``app.produce(n)`` prints the enqueue seconds), never by the
bench process itself: arq runs under another interpreter (see arq_env).
"""
