"""specreg's version (one place: the package, the CLI, results and the plugin read it)."""

__version__ = "0.1.0"
