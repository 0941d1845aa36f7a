#!/usr/bin/env python
"""How often one sweep goes back to its configuration (issue 35, item 2).

``python benchmarks/config_resolution.py [--agents A ...] [--seeds N] [--episodes K] [--out DIR]``

Runs one small ``drjax.sweeps.run`` (default: linear-mdp, dr-lsvi-ucb, 2 seeds x 5 episodes, in
memory, quiet) once untraced (imports, compilation), then again under ``sys.setprofile`` /
``threading.setprofile`` (the host thread that streams the tables included) and prints, for the
traced run:

* ``config_calls``: calls into functions defined in ``drjax/sweeps/config.py`` made from other
  modules (a call from one function of ``config.py`` into another is not counted);
* ``registry_calls``: calls into ``drjax/agents/registry.py`` from other modules (from
  ``config.py`` included: the validation's own look-ups);
* ``make_env_calls``: calls of ``drjax.sweeps.config.make_env``, and ``env_constructions``:
  calls of ``drjax.envs.make`` (each builds an environment);

each with its callers (module and function) and the callees, so a change can be followed. The
counts are deterministic (no timing): a measure of the design, run the same way before and after.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading


def _module(filename: str, root: str) -> str:
  path = os.path.realpath(filename)
  return os.path.relpath(path, root) if path.startswith(root) else os.path.basename(path)


def count(cfg, *, out=None) -> dict:
  """The counts of one traced ``sweeps.run(cfg, out=out, quiet=True)`` (after an untraced one)."""
  from drjax import envs, sweeps  # pylint: disable=g-import-not-at-top
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  from drjax.sweeps import config as sconf  # pylint: disable=g-import-not-at-top

  root = os.path.dirname(os.path.dirname(os.path.realpath(sconf.__file__)))
  config_file = os.path.realpath(sconf.__file__)
  registry_file = os.path.realpath(registry.__file__)
  make_env_code = sconf.make_env.__code__
  envs_make_code = envs.make.__code__
  files = {}  # co_filename -> realpath (cached: the profiler runs on every call)

  def real(fn):
    r = files.get(fn)
    if r is None:
      r = files[fn] = os.path.realpath(fn)
    return r

  counts = collections.Counter()
  callers = {k: collections.Counter() for k in ("config", "registry", "make_env", "envs.make")}
  callees = {k: collections.Counter() for k in ("config", "registry")}

  def prof(frame, event, arg):  # pylint: disable=unused-argument
    if event != "call":
      return
    code = frame.f_code
    back = frame.f_back
    where = (f"{_module(back.f_code.co_filename, root)}:{back.f_code.co_name}" if back is not None
             else "?")
    if code is make_env_code:
      counts["make_env"] += 1
      callers["make_env"][where] += 1
    if code is envs_make_code:
      counts["envs.make"] += 1
      callers["envs.make"][where] += 1
    fn = real(code.co_filename)
    for key, target in (("config", config_file), ("registry", registry_file)):
      if fn == target and (back is None or real(back.f_code.co_filename) != target):
        counts[key] += 1
        callers[key][where] += 1
        callees[key][code.co_name] += 1

  if out is not None:
    sweeps.run(cfg, out=out, quiet=True, overwrite=True)
  else:
    sweeps.run(cfg, quiet=True)  # untraced: imports, compilation
  threading.setprofile(prof)
  sys.setprofile(prof)
  try:
    if out is not None:
      sweeps.run(cfg, out=out, quiet=True, overwrite=True)
    else:
      sweeps.run(cfg, quiet=True)
  finally:
    sys.setprofile(None)
    threading.setprofile(None)
  return {"config_calls": counts["config"], "registry_calls": counts["registry"],
          "make_env_calls": counts["make_env"], "env_constructions": counts["envs.make"],
          "callers": {k: dict(v.most_common()) for k, v in callers.items()},
          "callees": {k: dict(v.most_common()) for k, v in callees.items()}}


def main(argv=None) -> dict:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--env", default="linear-mdp")
  ap.add_argument("--agents", nargs="+", default=["dr-lsvi-ucb"])
  ap.add_argument("--seeds", type=int, default=2)
  ap.add_argument("--episodes", type=int, default=5)
  ap.add_argument("--out", default=None, help="write the sweep to this directory (default: none)")
  ap.add_argument("--detail", action="store_true", help="print callers and callees")
  args = ap.parse_args(argv)
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  cfg = sweeps.SweepConfig(env=args.env, agents=tuple(args.agents), seeds=args.seeds,
                           episodes=args.episodes, test_episodes=5)
  res = count(cfg, out=args.out)
  print(f"one sweeps.run: {args.env}, {', '.join(args.agents)}, {args.seeds} seeds x "
        f"{args.episodes} episodes, out={args.out}")
  for k in ("config_calls", "registry_calls", "make_env_calls", "env_constructions"):
    print(f"  {k:18s} {res[k]}")
  if args.detail:
    for group in ("callers", "callees"):
      for k, v in res[group].items():
        print(f"  {group} of {k}:")
        for name, n in v.items():
          print(f"    {n:4d}  {name}")
  return res


if __name__ == "__main__":
  main()
