"""The paper's presets (the paper's choices and the authors' notebooks'), the environment and
agents of each experiment, and the default seed counts."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from drjax.agents import registry
from drjax.agents.lsvi import NOTEBOOK_PUT_KNOWN
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.put_option import PutOption
from drjax.paper import PRESET_NAMES


@dataclasses.dataclass(frozen=True)
class Preset:
  """Settings of a reproduction. Both presets use the authors' hyperparameters."""

  name: str
  beta: float = 1.0
  lam: float = 0.1
  episodes: int = 100
  delta: float = 0.3
  p: float = 0.001
  bonus: str = "paper"          # DR-LSVI-UCB bonus form
  clip: str = "paper"           # LSVI-UCB truncation form
  put_variant: str = "paper"    # put-option features
  put_fixed_init: bool = False  # one initial price per seed (notebook) vs per episode (paper)
  tie_break: str = "optimistic"  # greedy ties: largest untruncated value / lowest index
  put_known: bool = False       # put option: exercise value known, only hold learned, and
                                # LSVI-UCB's last-step hold weights w_H = 0 (notebook:
                                # NOTEBOOK_PUT_KNOWN, last_step_zero=True)
  lsvi_fail_zero: bool = True   # LSVI-UCB's backup knows the fail state (V = 0 there)


PRESETS = {
    "paper": Preset("paper"),
    "notebook": Preset("notebook", bonus="notebook", clip="notebook", put_variant="notebook",
                       put_fixed_init=True, tie_break="first", put_known=True),
}


class Setup(NamedTuple):
  """What ``drjax reproduce`` trains for one preset and experiment (see ``setup``)."""

  env: object
  params: object
  agents: dict
  beta: float
  lam: float


EXPERIMENTS = ("linear-mdp", "put-option")


# The paper compares one robust agent with its nominal baseline (registry names; display names,
# colors and hyperparameters come from drjax.agents.registry).
ROBUST_AGENT, NOMINAL_AGENT = "dr-lsvi-ucb", "lsvi-ucb"
DR, LS = registry.get(ROBUST_AGENT).display, registry.get(NOMINAL_AGENT).display


def agents_for(preset: Preset, env, capacity: int) -> dict:
  """``{ROBUST_AGENT: Agent, NOMINAL_AGENT: Agent}`` exactly as the paper programs build them."""
  known = NOTEBOOK_PUT_KNOWN if (preset.put_known and isinstance(env, PutOption)) else None
  return {
      ROBUST_AGENT: registry.make(ROBUST_AGENT, env, capacity=capacity, bonus=preset.bonus,
                                  tie_break=preset.tie_break, known=known),
      NOMINAL_AGENT: registry.make(NOMINAL_AGENT, env, capacity=capacity, clip=preset.clip,
                                   tie_break=preset.tie_break, fail_zero=preset.lsvi_fail_zero,
                                   known=known),
  }


def setup(preset: str = "paper", experiment: str = "linear-mdp", *, episodes: int = 100,
          xi_norm: float = 0.1) -> Setup:
  """The environment, source params and both agents of a preset, as ``drjax reproduce`` builds
  them, to train the authors' (or the paper's) configuration in your own script::

    s = drjax.paper.setup("notebook", "put-option")
    train = drjax.make_train(s.env, s.agents["dr-lsvi-ucb"], 100)

  Args:
    preset: ``"paper"`` or ``"notebook"``.
    experiment: ``"linear-mdp"`` (source params with ``xi_norm``) or ``"put-option"`` (p_u 0.5;
      the notebook preset draws one initial price per seed: ``fixed_initial_price``).
    episodes: K (the agents' capacity).
    xi_norm: linear MDP only.
  """
  if preset not in PRESETS:
    raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
  if experiment not in EXPERIMENTS:
    raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {experiment!r}")
  pre = PRESETS[preset]
  if experiment == "linear-mdp":
    env = LinearMDP()
    params = env.make_params(delta=pre.delta, p=pre.p, xi_norm=xi_norm)
  else:
    env = PutOption(variant=pre.put_variant)
    params = env.make_params(p_u=0.5)
  return Setup(env=env, params=params, agents=agents_for(pre, env, episodes), beta=pre.beta,
               lam=pre.lam)
assert tuple(PRESETS) == PRESET_NAMES

DEFAULT_SEEDS = {"linear-mdp": 20, "put-option": 10}  # the paper's numbers
