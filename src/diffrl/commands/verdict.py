"""The last line of a run that stopped on a failure: its verdict, printed so that nothing follows it on stderr."""
from __future__ import annotations

import os
import sys

PROCESS_ENTRY = False
"""Whether :func:`diffrl.cli.main` runs as the process's entry point (``diffrl ...``, ``python -m diffrl.cli``)
rather than called with arguments from Python (tests, notebooks)."""


def say_last(line: str) -> None:
    """Print a run's verdict so that it stays the last line of stderr.

    After a write failure, the checkpoint's other writes still in flight in orbax's and
    tensorstore's threads fail moments later, some only as the process exits, and print tracebacks
    of the same failure. When :func:`diffrl.cli.main` is the process's entry point the process is ending: file
    descriptor 2 (and ``sys.stderr``) go to /dev/null first, at the level of the descriptor, so a
    thread that holds the old ``sys.stderr`` object or writes from C++ is silenced too, and the
    verdict goes to the original stderr through a private duplicate of it. (Silencing after the
    verdict left a window in which a thread's traceback could follow it.) The old ``sys.stderr``
    is deliberately not flushed: it is line-buffered, so everything this process said in whole
    lines is already out, and what it still holds is a fragment of a thread's traceback in
    progress (the interpreter prints a source line's indentation and its text as separate writes),
    which a flush would put in front of the verdict on the same line. Not flushing is not enough:
    any other flush of that object (a logging handler's, after its record) before the descriptor
    moves sends such a fragment (``RuntimeError: ``, cut off) to stderr, so the verdict begins
    with a line break of its own and never shares a line with what came before. Called from
    Python, stderr is left alone."""
    if not PROCESS_ENTRY:
        print(line, file=sys.stderr)
        return
    sys.stderr = open(os.devnull, "w")  # before the descriptor moves: new writers go nowhere
    original = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    os.write(original, ("\n" + line + "\n").encode())
    os.close(original)
