"""Issue 55 item 2: a checkpoint is checked against the objects it will load into, before any
of it is used. Real checkpoints of short real runs (a single run and a ``seeds=2`` group) are
tampered with and resumed: a tensor of another shape, dtype or layout than the live one's
(Adam moments, weights, module buffers, normalizer statistics, tuner, replay rows, loop arrays,
generator states), a counter out of its range or inconsistent with the others, is refused in one
line and the run goes back to the previous checkpoint, ending exactly where a straight run ends.
Optimizer settings saved in the file (``lr``, ``betas``, ``maximize``, ...) are not used: the
run's config's are. A checkpoint whose finite values blow up only after resuming is named and the
run goes back to the one before it."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from test_hostile_checkpoints import _set
from test_resume_split import STATE_KEYS, assert_identical

from rlzoo.store.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint

PENDULUM = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
            "eval.every=0", "eval.episodes=1", "checkpoint.every=100", "log.every=50",
            "log.progress=false", "algo.buffer_size=5000", "seed=7", "checkpoint.keep=5",
            "normalize.obs=true", *TINY]
Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("fits") / "run"
    proc = run_cli([*PENDULUM, "total_steps=300"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("fits_group") / "run"
    proc = run_cli([*PENDULUM, "seeds=2", "total_steps=300"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of ``run_dir`` (a group's dirs beside it too)."""
    for member in run_dir.parent.iterdir():
        shutil.copytree(member, tmp_path / member.name, symlinks=True)
    return tmp_path / run_dir.name


def tamper(run_dir: Path, step: int, edit: Edit) -> Path:
    path = checkpoint_path(run_dir / "checkpoints", step)
    state = load_checkpoint(path)
    edit(state)
    torch.save(state, path)
    return path


def resume(run_dir: Path, total: int = 300) -> Any:
    return run_cli([f"resume={run_dir}", f"total_steps={total}"])


def assert_same_as(original: Path, run_dir: Path, step: int = 300) -> None:
    """The run's checkpoint at ``step`` equals ``original``'s bit for bit (a straight run's)."""
    want = load_checkpoint(checkpoint_path(original / "checkpoints", step))
    got = load_checkpoint(checkpoint_path(run_dir / "checkpoints", step))
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)


def skipped_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if x.startswith("rlzoo: warning: skipping")]


# ----------------------------------------------------------------------------- edits
def _opt(state: dict[str, Any], name: str = "critic") -> dict[str, Any]:
    return state["algo"]["optimizers"][name]


def _moment(key: str, change: Callable[[torch.Tensor], Any], name: str = "critic",
            index: int = 0) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        entries = _opt(state, name)["state"][index]
        entries[key] = change(entries[key])
    return edit


def _module(prefix: str, change: Callable[[torch.Tensor], Any]) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        modules = state["algo"]["modules"]
        key = next(k for k in modules if k.startswith(prefix))
        modules[key] = change(modules[key])
    return edit


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values, stored with the last two axes' strides swapped."""
    out = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert torch.equal(out, t) and not out.is_contiguous()
    return out


def _member(*keys: Any, change: Callable[[Any], Any], k: int = 0) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        node = state["members"][k]
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = change(node[keys[-1]])
    return edit


def _steps(value: float) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        for entries in _opt(state)["state"].values():
            entries["step"] = torch.full_like(entries["step"], value)
    return edit


def _python_rng(state: dict[str, Any]) -> None:
    version, words, gauss = state["rng"]["python"]
    state["rng"]["python"] = (version, (*words[:-1], float(words[-1])), gauss)


def _extra_moment(state: dict[str, Any]) -> None:
    entries = _opt(state)["state"][0]
    entries["max_exp_avg_sq"] = entries["exp_avg_sq"].clone()


# name: (edit, a fragment of the one warning line that skips the checkpoint)
REFUSED: dict[str, tuple[Edit, str]] = {
    # optimizer moments: the heap-corrupting cases, and dtype / layout / entries
    "exp_avg-fewer-elements": (_moment("exp_avg", lambda t: torch.zeros(1, 7)),
                               "critic.state.0.exp_avg has shape [7] where this run holds "
                               "[2, 4, 32]"),
    "exp_avg-transposed": (_moment("exp_avg", _transposed), "critic.state.0.exp_avg has strides"),
    "exp_avg_sq-half": (_moment("exp_avg_sq", lambda t: t.half()), "rlzoo never casts"),
    "exp_avg_sq-negative": (_moment("exp_avg_sq", lambda t: -t - 1e-3), "negative values"),
    "moment-unknown": (_extra_moment, "holds 'max_exp_avg_sq', which this run has not"),
    "moment-missing": (lambda s: _opt(s, "actor")["state"][1].pop("exp_avg"), "lacks 'exp_avg'"),
    "param-unknown": (lambda s: _opt(s)["state"].__setitem__(99, _opt(s)["state"][0]),
                      "holds parameter 99"),
    "group-params": (lambda s: _opt(s)["param_groups"][0].__setitem__("params", [0, 1]),
                     "are not this run's parameters"),
    "alpha-step-float64": (_moment("step", lambda t: t.double(), name="alpha"),
                           "alpha.state.0.step is a float64 tensor"),
    # weights, module buffers, normalizer statistics, tuner: never cast, never reshaped
    "weight-half": (_module("critic.net.layers.0.weight", lambda t: t.half()),
                    "is a float16 tensor"),
    "weight-long": (_module("actor.net.layers.2.weight", lambda t: t.long()),
                    "is a int64 tensor"),
    "weight-bool": (_module("critic.net.layers.4.bias", lambda t: t.bool()),
                    "is a bool tensor"),
    "weight-transposed": (_module("critic.net.layers.2.weight", _transposed), "has strides"),
    "weight-missing": (lambda s: s["algo"]["modules"].pop("actor.net.layers.4.bias"),
                       "lacks 'actor.net.layers.4.bias'"),
    "normalizer-var-float32": (_module("obs_normalizer.var", lambda t: t.float()),
                               "obs_normalizer.var is a float32 tensor"),
    "normalizer-count-shape": (_module("obs_normalizer.count", lambda t: t.reshape(1, -1)),
                               "obs_normalizer.count has shape"),
    "log_alpha-two": (_module("tuner.log_alpha", lambda t: torch.cat([t, t], -1)),
                      "[2] holds no single seed's weights"),
    "log_alpha-float64": (_module("tuner.log_alpha", lambda t: t.double()),
                          "tuner.log_alpha is a float64 tensor"),
    # the replay's rows and the loop's arrays
    "replay-obs-float64": (_member("buffer", "tensors", "obs", change=lambda t: t.double()),
                           "replay buffer tensors.obs is a float64 tensor"),
    "replay-terminated-float": (_member("buffer", "tensors", "terminated",
                                        change=lambda t: t.float()), "tensors.terminated"),
    "replay-obs-feature-missing": (_member("buffer", "tensors", "obs",
                                           change=lambda t: t[..., :2].contiguous()),
                                   "tensors.obs has shape"),
    "loop-obs-float64": (_member("loop", "obs", change=lambda t: t.double()),
                         "loop.obs is a float64 tensor"),
    "loop-length-negative": (_member("loop", "episode_length", change=lambda t: t - 10**6),
                             "negative lengths"),
    "loop-chunk-pos-float": (_member("loop", "chunk_pos", change=lambda t: t.float()),
                             "loop.chunk_pos is a float32 tensor"),
    # generator states
    "rng-torch-int64": (lambda s: s["rng"].__setitem__("torch", s["rng"]["torch"].long()),
                        "rng.torch is a int64 tensor"),
    "rng-numpy-key-float": (lambda s: s["rng"]["numpy"]["state"].__setitem__(
        "key", s["rng"]["numpy"]["state"]["key"].double()), "rng.numpy.state.key"),
    "rng-python-float-word": (_python_rng, "rng.python[1][624] is float"),
    "buffer-generator-int64": (_member("buffer", "generator", change=lambda t: t.long()),
                               "generator"),
    # the envs' own state, checked by the envs as it goes back
    "env-ended-float": (_member("env", "ended", change=lambda t: t.float()),
                        "saved env state 'ended' is not 1 bools"),
    "env-state-three": (_member("env", "envs", 0, "attributes", "state",
                                change=lambda t: torch.cat([t, t[:1]])),
                        "saved env attribute 'state' (f array [3])"),
    "env-attribute-float": (_member("env", "envs", 0, "attributes", "max_speed",
                                    change=lambda n: 8.5), "saved env attribute 'max_speed'"),
    # a setting of the env (the same kind, another value): the config makes the env, not the file
    "env-setting-gravity": (_member("env", "envs", 0, "attributes", "g", change=lambda g: 0.0),
                            "saved env attribute 'g' is 0.0 where this PendulumEnv is made "
                            "with 10.0"),
    "env-setting-torque": (_member("env", "envs", 0, "attributes", "max_torque",
                                   change=lambda t: 1e9), "'max_torque' is 1000000000.0"),
    # counters: integers in their range, consistent with each other
    "updates-negative": (_set("algo", "updates", value=-5), "algo.updates=int -5"),
    "updates-1e18": (_set("algo", "updates", value=10**18), "algo.updates=int 1000000000000000000"),
    "updates-one-too-many": (_set("algo", "updates", value=201), "more than the 200 updates"),
    "updates-float": (_set("algo", "updates", value=200.0), "algo.updates=float 200.0"),
    "adam-step-1e30": (_steps(1e30), "not integers in [0, 200]"),
    "adam-step-past-updates": (_steps(201.0), "not integers in [0, 200]"),
    "adam-step-fraction": (_steps(199.5), "not integers in [0, 200]"),
    "episodes-bool": (_member("counters", "episodes", change=lambda n: True),
                      "episodes=bool True"),
}


GROUP_CASES: dict[str, tuple[Edit, str]] = {
    "exp_avg-fewer-elements": (_moment("exp_avg", lambda t: torch.zeros(1, 7)),
                               "exp_avg has shape [1, 7] where this run holds [2, 2, 4, 32]"),
    "exp_avg-transposed": (_moment("exp_avg", _transposed), "exp_avg has strides"),
    "exp_avg-one-seed": (_moment("exp_avg", lambda t: t[:1].clone()), "has shape [1, 2, 4, 32]"),
    "weight-half": (_module("critic.net.layers.0.weight", lambda t: t.half()),
                    "is a float16 tensor"),
    "updates-negative": (_set("algo", "updates", value=-5), "algo.updates=int -5"),
    "adam-step-1e30": (_steps(1e30), "not integers in [0, 200]"),
    "draws-short": (_member("draws", change=lambda t: t[:10].clone()), "members.0.draws"),
    # the second seed's part of the one storage, checked like the first's
    "replay-obs-float64-seed-1": (_member("buffer", "tensors", "obs", change=lambda t: t.double(),
                                          k=1), "replay buffer tensors.obs is a float64 tensor"),
}


@pytest.mark.parametrize(("runs", "case"), [("single", case) for case in REFUSED]
                         + [("group", case) for case in GROUP_CASES])
def test_a_checkpoint_that_does_not_fit_is_skipped_for_the_previous_one(
        request: pytest.FixtureRequest, tmp_path: Path, runs: str, case: str) -> None:
    """The tampered newest checkpoint (300) is skipped with one line naming the entry; the run
    resumes from 200 and its new 300 is the straight run's, bit for bit; nothing good is pruned.
    ``runs``: a single run's checkpoints, or a seeds=2 group's."""
    edit, fragment = (REFUSED if runs == "single" else GROUP_CASES)[case]
    original = request.getfixturevalue(runs)
    run_dir = copy_run(original, tmp_path)
    newest = tamper(run_dir, 300, edit)
    proc = resume(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    skipped = skipped_lines(proc.stderr)
    assert len(skipped) == 1 and newest.name in skipped[0], proc.stderr[-3000:]
    assert fragment in skipped[0], skipped[0]
    if not case.startswith("env-"):  # refused before any of it loads (the envs check their own)
        assert "does not match this run's config" not in skipped[0], skipped[0]
    assert "from step_0000000200.pt at step 200" in proc.stderr
    assert [p.name for p in list_checkpoints(run_dir / "checkpoints")] == [
        "step_0000000100.pt", "step_0000000200.pt", "step_0000000300.pt"]
    assert_same_as(original, run_dir)


def test_a_lone_checkpoint_that_does_not_fit_is_one_line_and_nothing_is_written(
        single: Path, tmp_path: Path) -> None:
    run_dir = copy_run(single, tmp_path)
    for step in (100, 200):
        checkpoint_path(run_dir / "checkpoints", step).unlink()
    newest = tamper(run_dir, 300, REFUSED["exp_avg-fewer-elements"][0])
    before = newest.read_bytes()
    proc = resume(run_dir, 400)
    assert_user_error(proc, "none of the 1 checkpoints", "1 failing their checks")
    assert len(skipped_lines(proc.stderr)) == 1
    assert newest.read_bytes() == before
    assert [p.name for p in list_checkpoints(run_dir / "checkpoints")] == [newest.name]


def _setting(key: str, value: Any) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        for opt in state["algo"]["optimizers"].values():
            for group in opt["param_groups"]:
                group[key] = value
    return edit


SETTINGS = {  # saved optimizer settings: none may take effect
    "lr-0": _setting("lr", 0.0),
    "lr-nan": _setting("lr", math.nan),
    "maximize": _setting("maximize", True),
    "betas-1.5": _setting("betas", (1.5, 0.999)),
    "weight_decay-1e3": _setting("weight_decay", 1e3),
    "eps-1": _setting("eps", 1.0),
    "amsgrad": _setting("amsgrad", True),
    "not-fused": _setting("fused", None),
}


@pytest.mark.parametrize(("runs", "case"), [("single", case) for case in SETTINGS]
                         + [("group", case) for case in ("lr-0", "maximize", "betas-1.5")])
def test_the_optimizer_settings_come_from_the_config_never_from_the_file(
        request: pytest.FixtureRequest, tmp_path: Path, runs: str, case: str) -> None:
    """Step 200's settings tampered (and 300 gone): the run resumes from 200 without a word and
    its 300 is the straight run's bit for bit, so the saved settings were not used."""
    original = request.getfixturevalue(runs)
    run_dir = copy_run(original, tmp_path)
    checkpoint_path(run_dir / "checkpoints", 300).unlink()
    tamper(run_dir, 200, SETTINGS[case])
    proc = resume(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "from step_0000000200.pt at step 200" in proc.stderr
    assert not skipped_lines(proc.stderr), proc.stderr[-3000:]
    assert_same_as(original, run_dir)


def _blows_up(state: dict[str, Any]) -> None:
    """Finite critic weights so large that the first update overflows: no check can refuse
    them before the run, which meets inf/NaN right after resuming."""
    for key, value in state["algo"]["modules"].items():
        if key.startswith("critic.") and key.endswith("weight"):
            state["algo"]["modules"][key] = torch.full_like(value, 1e30)


@pytest.mark.parametrize("runs", ["single", "group"])
def test_a_checkpoint_that_blows_up_after_resuming_is_named_and_the_one_before_is_used(
        request: pytest.FixtureRequest, tmp_path: Path, runs: str) -> None:
    """200 (300 gone) holds finite weights that overflow at the first update: the NaN/inf line
    names 200 as the checkpoint the run resumed from, not as a good one, and the run goes back
    to 100 on its own and ends as the straight run."""
    original = request.getfixturevalue(runs)
    run_dir = copy_run(original, tmp_path)
    checkpoint_path(run_dir / "checkpoints", 300).unlink()
    poisoned = tamper(run_dir, 200, _blows_up)
    proc = resume(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    line = next(x for x in proc.stderr.splitlines() if "NaN or inf" in x)
    assert line.startswith("rlzoo: warning:"), line
    assert f"resumed from {poisoned} and wrote no checkpoint since" in line, line
    assert "going back to" in line and "step_0000000100.pt" in line, line
    assert "the last good checkpoint" not in line
    assert "from step_0000000100.pt at step 100" in proc.stderr
    assert_same_as(original, run_dir)
    assert "resumed from" in (run_dir / "train.log").read_text()


def test_without_a_checkpoint_before_it_the_error_names_the_one_resumed_from(
        single: Path, tmp_path: Path) -> None:
    run_dir = copy_run(single, tmp_path)
    for step in (100, 300):
        checkpoint_path(run_dir / "checkpoints", step).unlink()
    poisoned = tamper(run_dir, 200, _blows_up)
    proc = resume(run_dir)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert f"resumed from {poisoned}" in errors[0]
    assert "no checkpoint before it is left" in errors[0]
    assert "the last good checkpoint" not in errors[0]
    assert [p.name for p in list_checkpoints(run_dir / "checkpoints")] == [poisoned.name]


# ----------------------------------------------------------------------------- readers
@pytest.mark.parametrize("case", ["weight-half", "exp_avg-fewer-elements", "weight-transposed"])
def test_evaluate_refuses_weights_that_do_not_fit_in_one_line(
        single: Path, tmp_path: Path, case: str) -> None:
    run_dir = copy_run(single, tmp_path)
    newest = tamper(run_dir, 300, REFUSED[case][0])
    proc = run_cli([str(run_dir), "--episodes", "1", "--checkpoint", str(newest)],
                   module="rlzoo.evaluate")
    if case.startswith("exp_avg"):  # the evaluator reads the weights only
        assert proc.returncode == 0, proc.stderr[-2000:]
        return
    assert_user_error(proc, str(newest), "does not fit")
    assert not list(run_dir.glob("eval_*.json"))


def test_evaluate_a_group_member_refuses_a_cast_weight(group: Path, tmp_path: Path) -> None:
    run_dir = copy_run(group, tmp_path)
    tamper(run_dir, 300, REFUSED["weight-half"][0])
    member = next(d for d in tmp_path.iterdir() if d.name.endswith("-s8"))
    proc = run_cli([str(member), "--episodes", "1"], module="rlzoo.evaluate")
    assert_user_error(proc, "is a float16 tensor")


@pytest.mark.parametrize("change", ["half", "shape", "transposed"])
def test_load_policy_refuses_weights_that_do_not_fit(
        single: Path, tmp_path: Path, change: str) -> None:
    import rlzoo
    from rlzoo.errors import UserError

    run_dir = copy_run(single, tmp_path)
    record = load_checkpoint(run_dir / "policy.pt")
    key = "critic.net.layers.2.weight"
    weight = record["weights"][key]
    record["weights"][key] = {"half": weight.half(), "shape": weight[:, :3].clone(),
                              "transposed": _transposed(weight)}[change]
    torch.save(record, run_dir / "policy.pt")
    with pytest.raises(UserError, match=f"the weights in .* do not fit .*weights.{key}"):
        rlzoo.load_policy(run_dir)


def test_a_mujoco_state_of_another_shape_or_dtype_is_refused_before_it_is_set() -> None:
    """MuJoCo's integration state and derived positions go back only as this model's float64
    arrays of their shapes: a cast, a short array or one numpy would broadcast is refused and
    the env is left as it was."""
    import gymnasium as gym

    from rlzoo.envs.snapshot import get_mujoco_state, set_mujoco_state

    env = gym.make("Hopper-v5")
    env.reset(seed=0)
    base = env.unwrapped
    saved = get_mujoco_state(base.model, base.data)
    env.step(env.action_space.sample())
    moved = get_mujoco_state(base.model, base.data)
    for key, change in [("physics", lambda a: a.astype(np.float32)),
                        ("physics", lambda a: a[:-1]),
                        ("xpos", lambda a: a[:1, :1].copy()),  # would broadcast
                        ("xipos", lambda a: a.T.copy())]:
        bad = {**saved, key: change(saved[key])}
        with pytest.raises(ValueError, match=f"saved MuJoCo state {key} is"):
            set_mujoco_state(base.model, base.data, bad)
        now = get_mujoco_state(base.model, base.data)
        assert all(np.array_equal(now[k], moved[k]) for k in now)
    set_mujoco_state(base.model, base.data, saved)
    assert np.array_equal(get_mujoco_state(base.model, base.data)["physics"], saved["physics"])
    env.close()


@pytest.mark.parametrize("step", [-5, True, 10**18, 300.0])
def test_readers_refuse_an_env_step_out_of_its_range(
        single: Path, tmp_path: Path, step: Any) -> None:
    import rlzoo
    from rlzoo.errors import UserError

    run_dir = copy_run(single, tmp_path)
    newest = tamper(run_dir, 300, _set("counters", "step", value=step))
    proc = run_cli([str(run_dir), "--episodes", "1", "--checkpoint", str(newest)],
                   module="rlzoo.evaluate")
    assert_user_error(proc, "counters.step=")
    record = load_checkpoint(run_dir / "policy.pt")
    record["step"] = step
    torch.save(record, run_dir / "policy.pt")
    with pytest.raises(UserError, match="entries of the wrong type"):
        rlzoo.load_policy(run_dir)
