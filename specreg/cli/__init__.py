"""The `specreg` command line, one module per command group."""

import sys


def run() -> None:
    """The `specreg` console script and `python -m specreg`: main(), with a Ctrl-C that arrives while the
    command line is still being imported (its first ~0.2 s) ended as main() ends one: one line, exit 130."""
    try:
        from specreg.cli.main import main

        code = main()
    except KeyboardInterrupt:
        command = next((a for a in sys.argv[1:2] if a.isidentifier()), None)
        print(f"interrupted: specreg {command} stopped" if command else "interrupted: specreg stopped", file=sys.stderr)
        code = 130  # as main's EXIT_INTERRUPTED, which this module must not wait to import
    sys.exit(code)
