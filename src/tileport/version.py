"""tileport's version (the generated crates name it)."""

__version__ = "0.1.0"
