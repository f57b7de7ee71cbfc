"""The Slurm emulator: a real slurmctld and one slurmd per emulated GPU node, on loopback.

It is the Slurm world pointed at a local cluster, not a model of Slurm: every verb the
controller sends is executed by Debian's own daemons. See ``docs/emulator.md``.
"""
