"""demo: `make demo`, the whole story on one machine (not part of the installed package).

Holds `run` (`python -m demo.run`): a log on SQLite, the example kernels published, verified
and reproduced, a planted inflated claim refuted, the verdicts printed. It uses `ktl` as a
user would (the command line and the client's Python API); docs/demo.md says what it runs
and what `--exit` requires.
"""
