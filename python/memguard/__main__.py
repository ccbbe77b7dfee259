"""`python -m memguard ARGS...`: the same as the `memguard` command (memguard._cli)."""
import sys

from memguard._cli import main

sys.exit(main())
