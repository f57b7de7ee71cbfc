"""Built-in preemption policies."""
