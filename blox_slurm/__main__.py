"""``python -m blox_slurm``: the ``blox-slurm`` command, for machines without it on PATH."""

from .cli import app

app()
