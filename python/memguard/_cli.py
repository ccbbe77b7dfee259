"""The `memguard` command (a console script of the wheel) and `python -m memguard`: both run the
bundled C++ command line tool (memguard/_native/bin/memguard) in place of this process, so every
command has one implementation."""
import os
import sys

from memguard import _NATIVE


def main(argv=None):
    """Replaces this process with the bundled `memguard ARGS...` (ARGS: argv, else sys.argv[1:]).
    Returns 2, with one line on stderr, only when the tool is missing or cannot be run."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = os.path.join(_NATIVE, "bin", "memguard")
    if not os.path.isfile(path):
        print(f"memguard: the command line tool {path} is missing: this memguard package was not built "
              "(a source checkout?); install the torch-memguard wheel (tools/build-wheel.sh builds one)",
              file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(path, ["memguard"] + args)
    except OSError as e:
        print(f"memguard: cannot run {path}: {e.strerror}", file=sys.stderr)
        return 2
