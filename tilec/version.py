"""tilec's version: a leaf module, so that the parts of tilec that record it never import the package's entry."""

__version__ = "0.1.0"
