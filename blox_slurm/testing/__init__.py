"""Test doubles that are real code paths for the controller: an in-memory Slurm."""
