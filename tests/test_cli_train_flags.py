"""drjax train refuses flags that do not apply to the chosen environment (one line, exit 2,
nothing written), and writes to its own default directory (never mixing with reproduce's)."""

import pytest

from drjax import cli


@pytest.mark.parametrize("argv, flag", [
    (["--env", "put-option", "--xi-norm", "0.2"], "--xi-norm"),
    (["--env", "linear-mdp", "--evaluation", "mc"], "--evaluation"),
    (["--env", "linear-mdp", "--test-episodes", "5"], "--test-episodes"),
    (["--test-episodes=5"], "--test-episodes"),
])
def test_inapplicable_flags_are_refused(argv, flag, tmp_path, capsys):
  out = tmp_path / "o"
  with pytest.raises(SystemExit) as e:
    cli.main(["train", *argv, "--out", str(out)])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert flag in err[-1] and "Traceback" not in "\n".join(err)
  assert not out.exists()


def test_train_has_its_own_default_directory():
  args = cli.build_parser().parse_args(["train"])
  assert args.out == "results-train"
  assert cli.build_parser().parse_args(["reproduce"]).out == "results"
