"""``cmdare-tui serve``: the same app in a web browser through textual-serve.

Bound to 127.0.0.1 unless ``--host`` names another address; read-only unless ``--writable``
(a browser tab is easy to share, so writing is opt-in)."""

from __future__ import annotations

import argparse
import shlex
import sys

from cmdare.tui.commands import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# Source flags handed on to each browser session's app (the secret itself never: only the token file).
PASSED_THROUGH = (
    ("prometheus", "--prometheus"), ("selector", "--selector"), ("prometheus_token_file", "--prometheus-token-file"),
    ("tensorboard", "--tensorboard"), ("jsonl", "--jsonl"), ("tf_config", "--tf-config"),
    ("metrics_port", "--metrics-port"), ("job", "--job"), ("replay", "--replay"), ("replay_speed", "--replay-speed"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from cmdare.tui.cli import add_source_args

    p = subparsers.add_parser(
        "serve", help="serve the app to a web browser (textual-serve), read-only by default"
    )
    add_source_args(p)
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST}: this machine only)"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument(
        "--writable", action="store_true", help="allow actions that write (exports); off by default"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the command each browser session runs, then exit"
    )
    p.set_defaults(func=run)


def app_command(args: argparse.Namespace) -> str:
    """The command textual-serve starts for each browser session (this Python, this package)."""
    cmd = [sys.executable, "-m", "cmdare.tui.cli"]
    if getattr(args, "config", None):
        cmd += ["--config", args.config]
    for t in args.target:
        cmd += ["--target", t]
    if args.demo:
        cmd.append("--demo")
    cmd += ["--refresh", f"{args.refresh:g}", "--timeout", f"{args.timeout:g}"]
    for dest, flag in PASSED_THROUGH:  # the other source flags, as given
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if v not in (None, "", False):
                cmd += [flag] if v is True else [flag, str(v)]
    if not args.writable or args.read_only:
        cmd.append("--read-only")
    return shlex.join(cmd)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, not {args.port}")
    command = app_command(args)
    if args.dry_run:
        print(command)
        return 0
    from textual_serve.server import Server

    mode = "read-only" if "--read-only" in command else "WRITABLE"
    print(f"cmdare-tui serve: http://{args.host}:{args.port} ({mode}); Ctrl+C stops", file=sys.stderr)
    Server(command, host=args.host, port=args.port, title="cmdare-tui").serve()
    return 0
