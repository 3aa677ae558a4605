"""Apps the benchmarks run with ``lowkiq -r bench/apps/<app>.py``; configured by BENCH_* variables."""
