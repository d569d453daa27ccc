"""The service's subcommands: ``serve``, ``mcp`` and ``keys create|list|revoke``.

Registered by ``memory_pipeline.cli.build_parser``; importing this module is cheap
(FastAPI, uvicorn and the MCP SDK load only when a command runs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memory_pipeline.service import DEFAULT_THREADS

EXIT_OK, EXIT_USAGE = 0, 2
KEY_ENV = "MEMORY_PIPELINE_KEY"  # the API key `mcp` serves the owner of


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (0-65535): {text!r}")
    return value


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
        return value

    return parse


def add_commands(sub: Any) -> None:
    """Add ``serve``, ``mcp`` and ``keys`` to the CLI's subparsers."""
    sv = sub.add_parser("serve", help="serve the memory over HTTP (+ MCP at /mcp) to your apps")
    sv.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1 only)")
    sv.add_argument("--port", type=_port, default=8700, help="TCP port (default 8700)")
    sv.add_argument("--keys", help="key file (default: <state>/service/keys.json)")
    sv.add_argument("--rate", type=_positive(float), default=20.0, help="requests/s per key")
    sv.add_argument("--burst", type=_positive(int), default=40, help="burst per key")
    sv.add_argument("--timeout", type=_positive(float), default=30.0, help="seconds a request")
    sv.add_argument("--max-body", type=_positive(int), default=64 * 1024, help="bytes a body")
    sv.add_argument(
        "--cors-origin", action="append", default=[], help="allow this browser origin (repeat)"
    )
    sv.add_argument("--no-mcp", action="store_true", help="no MCP endpoint at /mcp")
    sv.add_argument(
        "--no-refresh",
        action="store_true",
        help="posted messages wait for the next run instead of refreshing the index",
    )
    sv.add_argument(
        "--workers",
        type=_positive(int),
        default=1,
        help="worker processes, one per core to use (each loads the index; default 1)",
    )
    sv.add_argument(
        "--threads",
        type=_positive(int),
        default=DEFAULT_THREADS,
        help=f"searches at once per worker (default {DEFAULT_THREADS})",
    )
    sv.set_defaults(func=cmd_serve)

    sv.add_argument(
        "--key-threads",
        type=_positive(int),
        default=1,
        help="of those, at most this many for one key; its other requests queue (default 1)",
    )
    sv.add_argument(
        "--header-timeout",
        type=_positive(float),
        default=10.0,
        help="seconds a request's headers may take to arrive (default 10)",
    )
    sv.add_argument(
        "--body-timeout",
        type=_positive(float),
        default=30.0,
        help="seconds a request's body may take after its headers (default 30)",
    )
    sv.add_argument(
        "--max-connections",
        type=_positive(int),
        default=1000,
        help="open connections per worker (default 1000, lowered to the open-file limit)",
    )
    sv.add_argument(
        "--streams-per-key",
        type=_positive(int),
        default=4,
        help="open MCP event streams per key (default 4)",
    )

    mc = sub.add_parser("mcp", help="an MCP server on stdin/stdout (for desktop assistants)")
    mc.add_argument("--owner", help="whose memory (required when there are several owners)")
    mc.add_argument(
        "--key-file",
        help=f"serve the owner of the API key in this file (or set ${KEY_ENV} to the key)",
    )
    # refused with a one-line error: a key in argv is readable by every local user (ps)
    mc.add_argument("--key", help=argparse.SUPPRESS)
    mc.add_argument("--keys", help="key file (default: <state>/service/keys.json)")
    mc.set_defaults(func=cmd_mcp)

    ks = sub.add_parser("keys", help="API keys of the service: create, list, revoke")
    ks.add_argument("--keys", help="key file (default: <state>/service/keys.json)")
    ksub = ks.add_subparsers(dest="keys_command", required=True)
    kc = ksub.add_parser("create", help="a new key; printed once, on the last line")
    kc.add_argument("--owner", required=True, help="the owner whose memory the key reads")
    kc.add_argument(
        "--scope",
        choices=["read", "write", "admin"],
        default="read",
        help="what the key may do: read, write (post messages) or admin (all, and forget)",
    )
    kc.set_defaults(func=cmd_keys_create)
    kl = ksub.add_parser("list", help="key ids, owners, scopes, revocations (never the keys)")
    kl.set_defaults(func=cmd_keys_list)
    kr = ksub.add_parser("revoke", help="revoke a key by id (takes effect on the next request)")
    kr.add_argument("key_id", help="the id `keys list` shows")
    kr.set_defaults(func=cmd_keys_revoke)


def _store(args: argparse.Namespace):
    from memory_pipeline.config import load_config, object_store_options
    from memory_pipeline.core.common import fs
    from memory_pipeline.service.keys import KeyStore, default_keys_path
    from memory_pipeline.state import prepare_state

    cfg = load_config(args.config)
    if cfg.output_uri:  # as the CLI: the object store from the AWS_* variables
        fs.configure_s3(object_store_options())
    import os

    from memory_pipeline.service.keys import KEYS_ENV

    # an older output's default key file moves into the state folder (never a given one)
    prepare_state(cfg, move_keys=not args.keys and not os.environ.get(KEYS_ENV))
    path = args.keys or default_keys_path(cfg.local_state_dir)
    return cfg, KeyStore(path)


def _known_owner(cfg: Any, owner: str) -> bool:
    """A key names an owner of the deployment: a configured one, or one with a folder."""
    if cfg.multi_owner:
        return owner in {o.id for o in cfg.owner_specs()}
    return owner == cfg.owner_id


def cmd_keys_create(args: argparse.Namespace) -> int:
    from memory_pipeline.service.keys import KeyError_

    cfg, store = _store(args)
    if not _known_owner(cfg, args.owner):
        known = [o.id for o in cfg.owner_specs()] if cfg.multi_owner else [cfg.owner_id]
        print(f"error: unknown owner {args.owner!r}; owners: {', '.join(known)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        record, token = store.create(args.owner, args.scope)
    except (KeyError_, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"created {record.key_id} (owner {record.owner}, scope {record.scope}) in {store.path}")
    print("the key is shown once; only its hash is stored:")
    print(token)
    return EXIT_OK


def cmd_keys_list(args: argparse.Namespace) -> int:
    from memory_pipeline.service.keys import KeyError_

    _, store = _store(args)
    try:
        records = store.records()
    except KeyError_ as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for r in records:
        state = f"revoked {r.revoked}" if r.revoked else "active"
        print(f"{r.key_id}  {r.owner:<20}  {r.scope:<5}  created {r.created}  {state}")
    print(f"{len(records)} keys in {store.path}")
    return EXIT_OK


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from memory_pipeline.service.keys import KeyError_

    _, store = _store(args)
    try:
        record = store.revoke(args.key_id)
    except KeyError_ as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"revoked {record.key_id} (owner {record.owner}) at {record.revoked}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from memory_pipeline.service.app import ServiceSettings, serve
    from memory_pipeline.service.operations import MemoryService

    cfg, store = _store(args)
    settings = ServiceSettings(
        host=args.host,
        port=args.port,
        max_body=args.max_body,
        rate=args.rate,
        burst=args.burst,
        timeout=args.timeout,
        cors_origins=list(args.cors_origin),
        mcp=not args.no_mcp,
        processes=args.workers,
        threads=args.threads,
        key_threads=args.key_threads,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
        streams_per_key=args.streams_per_key,
        refresh=not args.no_refresh,
    )
    if not store.records():
        print(
            f"note: no keys in {store.path}: create one with "
            "`memory-pipeline keys create --owner OWNER`",
            file=sys.stderr,
        )
    serve(MemoryService(cfg, args.config), store, settings)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from memory_pipeline.service.mcp_server import run_stdio
    from memory_pipeline.service.operations import MemoryService

    if args.key is not None:
        print(
            f"error: --key would show the key to every local user (ps); set ${KEY_ENV} "
            "or pass --key-file FILE",
            file=sys.stderr,
        )
        return EXIT_USAGE
    token, problem = _key_from(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if token is not None and args.owner is not None:
        print(f"error: pass --owner or a key (${KEY_ENV} / --key-file), not both", file=sys.stderr)
        return EXIT_USAGE
    cfg, store = _store(args)
    owner = args.owner
    if token is not None:
        record = store.verify(token)
        if record is None:
            print("error: unknown or revoked key", file=sys.stderr)
            return EXIT_USAGE
        owner = record.owner
    if owner is None:
        if cfg.multi_owner:
            print(
                f"error: several owners: pass --owner ID, or a key in ${KEY_ENV} / --key-file",
                file=sys.stderr,
            )
            return EXIT_USAGE
        owner = cfg.owner_id
    if not _known_owner(cfg, owner):
        print(f"error: unknown owner {owner!r}", file=sys.stderr)
        return EXIT_USAGE
    run_stdio(MemoryService(cfg, args.config), owner)
    return EXIT_OK


def _key_from(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The key ``mcp`` was given: from ``--key-file`` (its first line), else from the
    environment; (key or None, a one-line problem or None)."""
    import os
    from pathlib import Path

    if args.key_file:
        try:
            text = Path(args.key_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"{args.key_file}: cannot read the key file ({type(exc).__name__})"
        token = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not token:
            return None, f"{args.key_file}: the key file is empty"
        return token, None
    token = os.environ.get(KEY_ENV, "").strip()
    return (token or None), None
