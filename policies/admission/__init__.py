"""Built-in admission policies."""
