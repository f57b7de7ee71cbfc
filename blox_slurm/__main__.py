"""``python -m blox_slurm`` is the ``blox-slurm`` command (for machines without the script on PATH)."""

from .cli import app

app()
