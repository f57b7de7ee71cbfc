"""Pollux (OSDI'21) modelling: the artifact's application traces, the goodput model fitted
to them, and the per-job batch-size choice.

Pure functions over typed values, except :mod:`.traces`, the only module that reads files.
The scheduler that uses them (allocations maximizing fairness-weighted speedup) is not here
yet; ``docs/pollux.md`` says what is built and what is next.
"""
