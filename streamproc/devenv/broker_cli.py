"""``python -m streamproc.devenv.broker``: the local broker from a shell.

``start`` prints the bootstrap address on stdout (and nothing else), so that
``export STREAMPROC_BOOTSTRAP=$(python -m streamproc.devenv.broker start)`` works; progress goes
to stderr.  ``status`` exits 0 if the broker runs, 3 if not.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from streamproc.devenv.broker import LocalBroker
from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_security import SaslSslListener
from streamproc.devenv.broker_settings import (DEFAULT_HEAP, DEFAULT_KAFKA_VERSION, DEFAULT_PORT, ENV_CONTROLLER_PORT,
                                               ENV_DIR, ENV_HEAP, ENV_PORT, ENV_VERSION)

# One logger for everything the local broker does, whichever of its modules does it.
log = logging.getLogger("streamproc.devenv.broker")

EXIT_NOT_RUNNING = 3  # status: like the "program is not running" of LSB init scripts


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[broker] %(message)s", stream=sys.stderr)
    extra = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--set wants KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    try:
        broker = LocalBroker(port=args.port, controller_port=args.controller_port, state_dir=args.state_dir,
                             kafka_version=args.kafka_version, lib_dir=args.lib_dir, heap=args.heap,
                             extra_properties=extra, sasl_ssl=_sasl_ssl_listener(parser, args))
        return _run(args, broker)
    except BrokerError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streamproc.devenv.broker",
        description="Manage a single-node Apache Kafka broker (KRaft) on 127.0.0.1 for development.",
        epilog="start prints the bootstrap address on stdout; status exits 0 if running, 3 if not.",
    )
    parser.add_argument("command", choices=["start", "stop", "status", "kill", "reset", "install", "log"])
    parser.add_argument("-p", "--port", type=int, help=f"client port (${ENV_PORT}, default {DEFAULT_PORT})")
    parser.add_argument("--controller-port", type=int, help=f"controller port (${ENV_CONTROLLER_PORT}, default port+1)")
    parser.add_argument("-d", "--dir", dest="state_dir", help=f"state directory (${ENV_DIR})")
    parser.add_argument("--kafka-version", help=f"Kafka version (${ENV_VERSION}, default {DEFAULT_KAFKA_VERSION})")
    parser.add_argument("--lib-dir", help="jar cache directory")
    parser.add_argument("--heap", help=f"JVM heap options (${ENV_HEAP}, default {DEFAULT_HEAP!r})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra server property (repeatable)")
    parser.add_argument("--sasl-ssl-port", type=int,
                        help="also listen with SASL_SSL (TLS + SCRAM-SHA-512) on this port; needs the three below")
    parser.add_argument("--tls-cert", metavar="PEM_FILE", help="SASL_SSL: the server's certificate chain for 127.0.0.1")
    parser.add_argument("--tls-key", metavar="PEM_FILE", help="SASL_SSL: its key, unencrypted PKCS#8")
    parser.add_argument("--scram-user", metavar="NAME:PASSWORD",
                        help="SASL_SSL: the SCRAM-SHA-512 user, created when the storage is first formatted")
    parser.add_argument("--timeout", type=float, help="seconds to wait (start: 90, stop: 30)")
    parser.add_argument("-n", "--lines", type=int, default=100, help="log: how many lines")
    parser.add_argument("--json", action="store_true", help="status: print JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    return parser


def _sasl_ssl_listener(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SaslSslListener | None:
    if args.sasl_ssl_port is None:
        return None
    if not (args.tls_cert and args.tls_key and args.scram_user and ":" in args.scram_user):
        parser.error("--sasl-ssl-port needs --tls-cert, --tls-key and --scram-user NAME:PASSWORD")
    name, _, password = args.scram_user.partition(":")
    try:
        cert, key = Path(args.tls_cert).read_text(), Path(args.tls_key).read_text()
    except OSError as exc:
        parser.error(f"cannot read {exc.filename}: {exc.strerror}")
    return SaslSslListener(args.sasl_ssl_port, cert, key, name, password)


def _run(args: argparse.Namespace, broker: LocalBroker) -> int:
    """Carry out ``args.command``; the exit code."""
    cmd = args.command
    if cmd == "start":
        print(broker.start(timeout=args.timeout or 90.0), flush=True)
        if not broker.launched:
            log.info("already running (pid %s)", broker.status()["pid"])
    elif cmd == "stop":
        if not broker.stop(timeout=args.timeout or 30.0):
            log.info("not running")
    elif cmd == "kill":
        if not broker.kill():
            log.info("not running")
    elif cmd == "reset":
        broker.reset(timeout=args.timeout or 30.0)
    elif cmd == "install":
        print(broker.install(), flush=True)
    elif cmd == "log":
        print(broker.log_tail(args.lines), flush=True)
    elif cmd == "status":
        st = broker.status()
        if args.json:
            print(json.dumps(st), flush=True)
        elif st["running"]:
            print(f"running  pid {st['pid']}  {st['bootstrap']}  rss {_human_bytes(st['rss'])}  "
                  f"kafka {st['kafka_version']}  {st['state_dir']}", flush=True)
        else:
            print(f"not running  ({st['bootstrap']}, {st['state_dir']})", flush=True)
        return 0 if st["running"] else EXIT_NOT_RUNNING
    return 0


def _human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
