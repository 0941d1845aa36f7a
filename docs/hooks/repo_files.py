"""mkdocs hook: serve committed files that live outside docs/ with the site, so pages can link them.

The benchmark result files (``benchmarks/results/*``) stay next to the code that writes them;
this hook adds each one to the site at the same path (``benchmarks/results/<file>``), so a page
links it with a relative link (``benchmarks/results/amd-epyc-2c.json`` from a top-level page) and
``mkdocs build --strict`` checks that the file exists.
"""

import glob
import os

from mkdocs.structure.files import File

# Repository folders (relative to mkdocs.yml) whose files the site serves at the same path.
SERVED = ("benchmarks/results",)


def on_files(files, config):
  root = os.path.dirname(config.config_file_path)
  for folder in SERVED:
    for path in sorted(glob.glob(os.path.join(root, folder, "*"))):
      if os.path.isfile(path):
        uri = os.path.relpath(path, root).replace(os.sep, "/")
        files.append(File.generated(config, uri, abs_src_path=path))
  return files
