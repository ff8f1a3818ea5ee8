"""The `specreg` command line, one module per command group."""
