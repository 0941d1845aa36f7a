"""``python -m drjax.cli [command] [options]``: the ``drjax`` console script."""

from drjax.cli import console_main

if __name__ == "__main__":
  console_main()
