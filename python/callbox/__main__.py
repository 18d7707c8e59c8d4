"""python -m callbox: look at a config from the shell, as the Go CLI does.

    python -m callbox list CONFIG     every callback: name, content id, engine, signature
    python -m callbox check CONFIG    load everything, run nothing; exit 2 with the error if it fails
    python -m callbox version         the package's and the library's versions

Exit status: 0 success, 2 a config, module or library error (the error on
stderr, as `callbox check` reports it). Text that comes from a module
(callback names, signatures) is printed with control and bidirectional
characters escaped, so a module cannot forge a line or drive the terminal.
"""

import argparse
import os
import sys
import unicodedata
from typing import List, Optional, Sequence, TextIO

from . import __version__, library_version
from .errors import CallbackError
from .host import CallbackInfo, Host


def _safe(s: str) -> str:
    """s with control and format characters (\\x1b, \\n, \\u202e) escaped."""
    out = []
    for ch in s:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("\\x%02x" % ord(ch) if ord(ch) < 0x100 else "\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def _table(rows: List[List[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] + "\n")


def _open(config: str) -> Host:
    # Always a file: Host() would read a string that names no file as
    # config text.
    if not os.path.isfile(config):
        raise OSError("%s: no such config file" % config)
    return Host(config)


def cmd_list(config: str, out: TextIO) -> None:
    with _open(config) as h:
        infos: List[CallbackInfo] = h.callbacks()
    rows = [["NAME", "ID", "ENGINE", "SIGNATURE"]]
    rows += [[_safe(i.name), i.id, i.engine, _safe(i.signature)] for i in infos]
    _table(rows, out)


def cmd_check(config: str, out: TextIO) -> None:
    with _open(config) as h:
        infos = h.callbacks()
    rows = [["CALLBACK", "ENGINE", "BATCHING", "INPUTS", "OUTPUTS", "SIGNATURE"]]
    rows += [[_safe(i.name), i.engine, i.batching, str(i.num_inputs), str(i.num_outputs), _safe(i.signature)]
             for i in infos]
    _table(rows, out)
    out.write("%s: ok, %d callback(s) loaded\n" % (config, len(infos)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m callbox",
                                description="Look at a callbox config: list its callbacks, or check that it loads.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    pl = sub.add_parser("list", help="list every callback of CONFIG: name, content id, engine, signature")
    pl.add_argument("config", metavar="CONFIG", help="config file (YAML, TOML or JSON)")
    pc = sub.add_parser("check", help="validate CONFIG and load every module, without running a callback")
    pc.add_argument("config", metavar="CONFIG", help="config file (YAML, TOML or JSON)")
    sub.add_parser("version", help="the package's and the library's versions")
    args = p.parse_args(argv)
    try:
        if args.command == "list":
            cmd_list(args.config, sys.stdout)
        elif args.command == "check":
            cmd_check(args.config, sys.stdout)
        else:
            sys.stdout.write("callbox %s (libcallbox %s)\n" % (__version__, library_version()))
    except (CallbackError, OSError) as e:
        sys.stderr.write("callbox: %s\n" % _safe(str(e)))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
