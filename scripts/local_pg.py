#!/usr/bin/env python3
"""A local PostgreSQL with pgvector, for trying embedcheck's pgvector stores without a database server.

The ``pgserver`` package (``pip install 'embedcheck[stores]'``) ships PostgreSQL and the pgvector
extension as a wheel; this starts its server on a unix socket in a data folder, creates the
``vector`` extension in the ``postgres`` database and prints the libpq URI on stdout (one line; no
password: the server accepts local socket connections only). Add ``&table=T&column=C`` to that URI
for an embedcheck store. The server keeps running after the script exits; ``--stop`` stops it.

    python scripts/local_pg.py                     # start (or find) the server, print its URI
    URI=$(python scripts/local_pg.py)              # in a shell: "$URI&table=docs&column=embedding"
    python scripts/local_pg.py --stop              # stop it (the data folder stays; --delete removes it)

The data folder defaults to ``embedcheck-pg`` in the system's temporary folder (``--data DIR``
chooses another): run as root, pgserver starts PostgreSQL as an unprivileged user of its own, which
must be able to reach the folder, so a folder under a private home is refused by PostgreSQL.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

DEFAULT_DATA = Path(tempfile.gettempdir()) / "embedcheck-pg"


def start(data: Path) -> str:
    """Start (or reuse) the server of ``data``, with pgvector created; its URI."""
    import pgserver

    srv = pgserver.get_server(data, cleanup_mode=None)  # None: the server outlives this process
    uri = srv.get_uri()
    srv.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    return uri


def stop(data: Path, delete: bool = False) -> None:
    import pgserver

    pgserver.get_server(data, cleanup_mode="delete" if delete else "stop").cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"the server's data folder (default {DEFAULT_DATA})")
    ap.add_argument("--stop", action="store_true", help="stop the server of --data")
    ap.add_argument("--delete", action="store_true", help="with --stop: also remove the data folder")
    args = ap.parse_args(argv)
    if args.delete and not args.stop:
        print("error: --delete goes with --stop", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():  # platformdirs' note on an unset XDG_RUNTIME_DIR: not ours to show
            warnings.simplefilter("ignore")
            import pgserver  # noqa: F401
    except ImportError:
        print("error: pgserver is not installed: pip install 'embedcheck[stores]'", file=sys.stderr)
        return 2
    if args.stop:
        if not (args.data / "postmaster.pid").exists() and not args.data.is_dir():
            print(f"error: --data {args.data}: no server folder there", file=sys.stderr)
            return 2
        stop(args.data, args.delete)
        print(f"stopped the PostgreSQL of {args.data}" + (" and removed the folder" if args.delete else ""),
              file=sys.stderr)
        return 0
    uri = start(args.data)
    print(uri)
    print(f"PostgreSQL + pgvector running (data {args.data}); stop it with: python scripts/local_pg.py"
          f"{'' if args.data == DEFAULT_DATA else f' --data {args.data}'} --stop", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
