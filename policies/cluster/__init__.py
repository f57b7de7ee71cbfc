"""Built-in cluster policies."""
