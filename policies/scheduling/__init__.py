"""Built-in scheduling policies."""
