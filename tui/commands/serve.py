"""``cmdare-tui serve``: the same app in a web browser through textual-serve.

Safe by default: bound to 127.0.0.1 (another address needs ``--allow-remote`` and prints a warning),
read-only unless ``--writable``, WebSockets only from the page's own origin (``--allow-origin`` adds
others), at most ``--max-sessions`` app processes, each ended when its browser goes, each with a terminal of
at most 500 × 200 cells (:mod:`cmdare.tui.commands.serve_server`).

No secret goes on a command line (visible to every user in ``ps``): a flag whose value holds a
credential (a URL with ``user:password@`` or a token in its query) reaches each session through the
environment variable ``CMDARE_SESSION_ARGS``; ``--dry-run`` prints it redacted. Tokens go by file
(``--prometheus-token-file``) or by ``PROMETHEUS_TOKEN``, which sessions inherit.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import sys
from collections.abc import MutableMapping
from urllib.parse import urlsplit

from cmdare.tui.commands import UsageError
from cmdare.tui.source_flags import add_source_args, check_some_source

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 4
SESSION_ENV = "CMDARE_SESSION_ARGS"  # JSON list of extra arguments for a served session
SESSION_FLAG = "--session-args-from-env"  # first argument of a served session: read SESSION_ENV
# Source flags handed on to each browser session's app (the token itself never: only the token file).
PASSED_THROUGH = (
    ("prometheus", "--prometheus"), ("selector", "--selector"), ("prometheus_token_file", "--prometheus-token-file"),
    ("tensorboard", "--tensorboard"), ("jsonl", "--jsonl"), ("mlflow", "--mlflow"), ("mlruns", "--mlruns"),
    ("mlflow_experiment", "--mlflow-experiment"),
    ("tf_config", "--tf-config"),
    ("metrics_port", "--metrics-port"), ("job", "--job"), ("replay", "--replay"), ("replay_speed", "--replay-speed"),
)  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve`` and its flags to the sub-command parsers."""
    p = subparsers.add_parser(
        "serve", help="serve the app to a web browser (textual-serve), read-only by default"
    )
    add_source_args(p)
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST}: this machine only)"
    )
    p.add_argument("--allow-remote", action="store_true",
                   help="required to bind an address other than loopback (anyone who reaches it sees the app)")  # fmt: skip
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, metavar="N",
                   help=f"browser sessions (app processes) at once (default {DEFAULT_MAX_SESSIONS})")  # fmt: skip
    p.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                   help="another page origin (scheme://host:port) allowed to open sessions (repeatable)")  # fmt: skip
    p.add_argument(
        "--writable", action="store_true", help="allow actions that write (exports); off by default"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the command each browser session runs, then exit"
    )
    p.set_defaults(func=run)


def _is_secret(value: str) -> bool:
    from cmdare.collectors.redaction import redact

    return redact(value) != value


def session_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The arguments each browser session's app gets: (on its command line, through the environment).
    Any value that holds a credential goes through the environment."""
    public: list[str] = []
    secret: list[str] = []

    def add(flag: str, value: object = None) -> None:
        pair = [flag] if value is None else [flag, str(value)]
        (secret if value is not None and _is_secret(str(value)) else public).extend(pair)

    if getattr(args, "config", None):
        add("--config", args.config)
    for t in args.target:
        add("--target", t)
    if args.demo:
        add("--demo")
    add("--refresh", f"{args.refresh:g}")
    add("--timeout", f"{args.timeout:g}")
    for dest, flag in PASSED_THROUGH:  # the other source flags, as given
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if v not in (None, "", False):
                add(flag, None if v is True else v)
    if args.prices != "offline":
        add("--prices", args.prices)
    if not args.writable or args.read_only:
        add("--read-only")
    return public, secret


def app_command(args: argparse.Namespace) -> str:
    """The command textual-serve starts for each browser session (this Python, this package), run
    under ``exec`` so the session's process is the app itself."""
    public, secret = session_args(args)
    cmd = [sys.executable, "-m", "cmdare.tui.cli", *([SESSION_FLAG] if secret else []), *public]
    return "exec " + shlex.join(cmd)


def run(args: argparse.Namespace) -> int:
    """Serve the app to a browser through textual-serve; the exit status."""
    from cmdare.collectors.redaction import redact

    _check(args)
    check_some_source(args)
    command = app_command(args)
    _, secret = session_args(args)
    if args.dry_run:
        print(command)
        if secret:
            print(f"# and, through the environment ({SESSION_ENV}): {redact(shlex.join(secret))}")
        return 0
    if secret:
        os.environ[SESSION_ENV] = json.dumps(secret)  # inherited by each session, never on its command line
    from cmdare.tui.commands.serve_server import MAX_COLUMNS, MAX_ROWS, SafeServer, is_loopback

    mode = "read-only" if "--read-only" in command else "WRITABLE"
    shown = f"[{args.host}]" if ":" in args.host else args.host
    if not is_loopback(args.host):
        print(f"cmdare-tui serve: WARNING: listening on {args.host}, not loopback: anyone who can reach this "
              f"machine's port {args.port} sees the app ({mode}) and your cluster's data. Prefer the default "
              "127.0.0.1 with an SSH tunnel (ssh -L).", file=sys.stderr)  # fmt: skip
    print(f"cmdare-tui serve: http://{shown}:{args.port} ({mode}; at most {args.max_sessions} sessions, "
          f"each a terminal of at most {MAX_COLUMNS}×{MAX_ROWS}); "
          "Ctrl+C stops", file=sys.stderr)  # fmt: skip
    SafeServer(command, host=args.host, port=args.port, title="cmdare-tui", max_sessions=args.max_sessions,
               allowed_origins=tuple(args.allow_origin)).serve()  # fmt: skip
    return 0


def _check(args: argparse.Namespace) -> None:
    from cmdare.tui.cli_args import url
    from cmdare.tui.commands.serve_server import is_loopback

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, not {args.port}")
    if not 1 <= args.max_sessions <= 64:
        raise UsageError(f"--max-sessions must be 1-64, not {args.max_sessions}")
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"--host {args.host} is not loopback: anyone who reaches it sees the app; "
                         "add --allow-remote to confirm (or use an SSH tunnel to 127.0.0.1)")  # fmt: skip
    if args.record:
        raise UsageError("serve does not record (--record, or record in the config's [sources]): each browser "
                         "session is an app of its own; record in a terminal (cmdare-tui --record FILE) and serve "
                         "the recording (serve --replay FILE)")  # fmt: skip
    for origin in args.allow_origin:
        try:
            url(origin)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--allow-origin: {exc}") from None
        if urlsplit(origin).path not in ("", "/") or urlsplit(origin).query:
            raise UsageError(f"--allow-origin: an origin is scheme://host[:port], without a path: {origin!r}")
    _check_listen(args.host, args.port, bind=not args.dry_run)


def _check_listen(host: str, port: int, *, bind: bool) -> None:
    """``host`` resolves and (``bind``) ``host:port`` can be listened on, as the server will (address reuse on);
    else one line (UsageError). Checked before the server says where it listens."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise UsageError(f"--host {host!r} does not resolve to an address ({reason})") from None
    for family, kind, proto, _, address in addresses if bind else ():
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise UsageError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None


def session_argv(argv: list[str], env: MutableMapping[str, str] | None = None) -> list[str]:
    """A served session's arguments: ``argv`` without :data:`SESSION_FLAG`, plus the ones passed
    through the environment (the variable is removed, so nothing the app starts inherits it)."""
    if not argv or argv[0] != SESSION_FLAG:
        return argv
    env = os.environ if env is None else env
    try:
        extra = json.loads(env.pop(SESSION_ENV, "[]"))
    except ValueError:
        extra = None
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise UsageError(f"{SESSION_ENV} is not a JSON list of strings")
    return [*argv[1:], *extra]
