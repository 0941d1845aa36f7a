"""``python -m drjax.bench [--quick] [--full] [--json FILE] [--only NAME ...]``: ``drjax bench``."""

import sys

from drjax import cli

if __name__ == "__main__":
  sys.exit(cli.main(["bench"] + sys.argv[1:]))
