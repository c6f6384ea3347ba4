"""The package version (a leaf module: the parse cache keys on it without importing the package)."""

__version__ = "0.2.0"
