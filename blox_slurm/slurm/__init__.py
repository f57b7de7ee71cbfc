"""The Slurm world: read Slurm into a ClusterSnapshot and drive it with control verbs."""
