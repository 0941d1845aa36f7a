"""The typed protocols (drjax.protocols): the docs list exactly them, and the built-in agents and
environments satisfy them (attributes present, every protocol argument accepted by name)."""

import inspect
import os
import re

import pytest

from drjax import envs, protocols
from drjax.agents import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _doc_blocks():
  with open(os.path.join(ROOT, "docs", "agents.md")) as f:
    text = f.read()
  out = {}
  for m in re.finditer(r"`drjax\.protocols\.(\w+)`[^\n]*:\n\n```python\n(.*?)```", text, re.S):
    out[m.group(1)] = [line for line in m.group(2).splitlines() if line.strip()]
  return out


def test_docs_list_exactly_the_protocols():
  blocks = _doc_blocks()
  assert set(blocks) == {p.__name__ for p in protocols.PROTOCOLS}
  for p in protocols.PROTOCOLS:
    assert blocks[p.__name__] == protocols.describe(p), p.__name__


def _accepts(fn, proto_fn):
  """Every parameter of the protocol's method is a parameter of ``fn`` of the same kind."""
  have = inspect.signature(fn).parameters
  for name, p in list(inspect.signature(proto_fn).parameters.items())[1:]:
    assert name in have, f"{fn} lacks {name}"
    if p.kind == inspect.Parameter.KEYWORD_ONLY:
      assert have[name].kind in (inspect.Parameter.KEYWORD_ONLY,
                                 inspect.Parameter.POSITIONAL_OR_KEYWORD), name


def _conforms(obj, proto):
  assert isinstance(obj, proto), (obj, proto)
  for name, fn in proto.__dict__.items():
    if callable(fn) and not name.startswith("_"):
      _accepts(getattr(obj, name), fn)


@pytest.mark.parametrize("name", registry.names("online") + registry.names("offline"))
def test_every_registered_agent_satisfies_its_protocol(name):
  spec = registry.get(name)
  if spec.kind == "online":
    _conforms(registry.make(name, (3, 4, 2), capacity=3), protocols.OnlineAgent)
  else:
    _conforms(registry.make(name, (3, 4, 2)), protocols.OfflineAgent)


@pytest.mark.parametrize("name", envs.names())
def test_every_registered_environment_satisfies_its_protocol(name):
  try:
    env = envs.make(name)
  except ImportError as e:  # an optional dependency (gymnax) missing in this lane
    pytest.skip(str(e))
  proto = (protocols.FiniteEnvironment if isinstance(env, envs.FiniteEnvironment)
           else protocols.Environment)
  _conforms(env, proto)


def test_a_missing_method_fails_the_check():
  class Half:
    name, kind, config, hparams_type, needs_pilot = "x", "offline", None, tuple, False

    def fit(self, ds, hparams, *, pilot=None, model=None, form="auto"):
      del ds, hparams, pilot, model, form

  assert not isinstance(Half(), protocols.OfflineAgent)  # no act / q_values / width
