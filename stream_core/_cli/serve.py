"""`stream-core serve DIR`: a folder of recordings served as a fake vendor on loopback."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ._common import usage_error

__all__ = ["run"]


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..testing._serve import serve

    root = Path(args.dir)
    if not root.is_dir():
        return usage_error(err, f"{root} is not a folder of recordings")
    return serve(root, args.host, args.port, chunk_size=args.chunk_size, delay=args.delay, out=err)
