"""Children that Ctrl-C reaches, however the suite was started.

A shell without job control starts background jobs (`pytest ... &`, `nohup`) with SIGINT ignored, and
children inherit that; Python then installs no KeyboardInterrupt handler, so a test's SIGINT would do
nothing. The tests that stand for a user's Ctrl-C start their child as a terminal would."""

import signal


def as_from_a_terminal() -> None:
    """`preexec_fn`: SIGINT back to its default in the child, before Python starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
