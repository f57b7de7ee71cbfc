"""Built-in Blox policies, one module each, registered by name (``blox-slurm policies``)."""
