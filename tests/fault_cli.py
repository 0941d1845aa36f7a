"""``drjax`` with a fault injected from outside the library, for the tests that interrupt sweeps.

    python tests/fault_cli.py --kill-after-chunks N -- sweep ARGS...
        SIGKILL once N chunk files are written (wraps ``drjax.sweeps.storage._write_chunk``);
    python tests/fault_cli.py --chunk-delay T -- sweep ARGS...
        each chunk's results are fetched T seconds late (wraps ``drjax.sweeps.running._get``),
        time enough to send a SIGINT while chunks remain.

Then runs the ``drjax`` console script with ``ARGS`` in this process.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main(argv) -> None:
  sep = argv.index("--")
  parser = argparse.ArgumentParser()
  parser.add_argument("--kill-after-chunks", type=int)
  parser.add_argument("--chunk-delay", type=float)
  opts = parser.parse_args(argv[:sep])
  from drjax import cli  # pylint: disable=g-import-not-at-top
  from drjax.sweeps import running, storage  # pylint: disable=g-import-not-at-top

  if opts.kill_after_chunks is not None:
    write, written = storage._write_chunk, []  # pylint: disable=protected-access

    def write_then_kill(path, *args):
      write(path, *args)
      written.append(path)
      if len(written) >= opts.kill_after_chunks:
        os.kill(os.getpid(), signal.SIGKILL)

    storage._write_chunk = write_then_kill  # pylint: disable=protected-access
  if opts.chunk_delay is not None:
    get = running._get  # pylint: disable=protected-access

    def late_get(tree):
      time.sleep(opts.chunk_delay)
      return get(tree)

    running._get = late_get  # pylint: disable=protected-access
  sys.argv = ["drjax", *argv[sep + 1:]]
  cli.console_main()


if __name__ == "__main__":
  main(sys.argv[1:])
