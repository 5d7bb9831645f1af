"""The ``psp`` command. Each subcommand lives in its own module with ``NAME``, ``HELP`` and a
``register(subparsers)``.

Adding a command means adding a module to ``COMMANDS``; nothing else here changes. A command
that writes files sets ``file_roles`` beside ``func`` (a function of the parsed arguments giving
a :class:`psp.io.FileRoles`), and nothing runs when one of its outputs is one of its inputs.

Failures a user can act on end in one line, ``psp COMMAND: error: ...``, naming the file and
the reason (see :func:`psp.io.failure_message`): exit status 2 for bad input, 1 for a write the
system refused (no space, a file size limit or quota, a read-only or missing folder, no
permission) or another file it refused. ``-v`` logs the traceback too. A bug keeps its traceback.

The command starts at once: only the subcommand on the command line is registered in full (its
options may need defaults from heavy packages), the others are listed by name and help alone,
and every module imports torch, Faiss, numpy and the like inside the functions that use them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from psp.io import InputError, exit_on_sigterm, failure_message

log = logging.getLogger(__name__)

COMMANDS = ["embed", "score", "convert", "export", "train", "evaluate", "mine", "data", "speed"]


def requested_command(argv: list[str]) -> str | None:
    """The subcommand word of ``argv``: its first argument that is not an option (``psp`` has
    no option taking a value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``psp`` parser, with the options of ``command`` (``None``: of no command)."""
    parser = argparse.ArgumentParser(
        prog="psp",
        description="P-SP sentence embeddings: embed, score, train, evaluate, mine bitext.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"psp.cli.{name}")
        if module.NAME == command:
            module.register(subparsers)
        else:
            subparsers.add_parser(module.NAME, help=module.HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(requested_command(argv)).parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    exit_on_sigterm()  # a terminated command removes its temporaries, as on Ctrl-C
    try:
        if hasattr(args, "file_roles"):
            args.file_roles(args).check()
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (``psp score ... | head``): stop quietly with the status of a
        # process killed by SIGPIPE, as cat does, and point stdout at /dev/null so the flush
        # at interpreter exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (InputError, OSError) as err:
        message = failure_message(err)
        if message is None:
            raise
        log.debug("psp %s failed", args.command, exc_info=True)
        print(f"psp {args.command}: error: {message}", file=sys.stderr)
        return 2 if isinstance(err, InputError) else 1


if __name__ == "__main__":
    sys.exit(main())
