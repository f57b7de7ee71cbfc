"""blox-slurm: Blox's modular deep-learning scheduler toolkit, running beside Slurm."""

__version__ = "0.1.0"
