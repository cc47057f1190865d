"""Sub-commands of ``cmdare-tui``.

Each module here exposes ``register(subparsers) -> None``; the parser it adds sets
``func=<callable(args) -> int>`` via ``set_defaults``. ``cmdare.tui.cli`` lists the modules.
A command reports bad input by raising :class:`UsageError` (one-line message, exit status 2).
"""


class UsageError(Exception):
    """Bad command-line input: the CLI prints ``cmdare-tui: error: <message>`` and exits 2."""
