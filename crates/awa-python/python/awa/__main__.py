"""``python -m awa ...``: the same command line as the ``awa`` binary."""

import signal
import sys

from . import _awa


def main() -> int:
    # Ctrl-C goes to the command (a worker shuts down gracefully on it),
    # as with the binary, instead of raising KeyboardInterrupt later.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _awa.cli_main(["awa", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
