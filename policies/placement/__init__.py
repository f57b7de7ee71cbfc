"""Built-in placement policies."""
