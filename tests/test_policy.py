"""rlzoo.load_policy / rlzoo.policy.policy.Policy: a run's policy.pt as a module acting in env
units.

Three tiny runs (module scope): SAC on Pendulum (bounds +-2), TD3 with an action-sequence critic
(chunks of H = 4) on InvertedPendulum-v5 (bounds +-3), and MADDPG on MPE simple_spread (Box(0, 1)
per agent). Actions are checked against the training env adapters' own scaling, and the exported
``.pt2`` programs are run in a process where importing rlzoo fails.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import REPO, run_cli
from omegaconf import OmegaConf

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.config.build import make_env
from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.errors import UserError
from rlzoo.policy.policy import Policy, load_policy
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint

TINY = ["algo.actor.hidden=[16]", "critic.hidden=[16]", "algo.buffer_size=1000",
        "eval.episodes=1", "log.progress=false"]
RUNS = {
    "sac": ["algo=sac", "env=Pendulum", "total_steps=300", "algo.learning_starts=100"],
    "chunk": ["algo=td3", "critic=action_sequence", "env=InvertedPendulum", "total_steps=300",
              "algo.learning_starts=100"],
    "maddpg": ["algo=maddpg", "env=mpe/simple_spread", "total_steps=137",
               "algo.learning_starts=50", "algo.batch_size=32"],
}


def _train(tmp_path_factory: pytest.TempPathFactory, kind: str) -> Path:
    run_dir = tmp_path_factory.mktemp(kind) / "run"
    proc = run_cli([*RUNS[kind], *TINY], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "sac")


@pytest.fixture(scope="module")
def chunk_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "chunk")


@pytest.fixture(scope="module")
def maddpg_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "maddpg")


def env_obs(policy: Policy, batch: int, seed: int = 0) -> torch.Tensor:
    """Real first observations of the run's env (``batch`` envs) with noise on half of them."""
    env = make_env(OmegaConf.create(policy.config), batch, seed)
    try:
        obs = torch.as_tensor(env.reset()[0], dtype=torch.float32)
    finally:
        env.close()
    noise = torch.randn_like(obs) * (torch.arange(batch) % 2).reshape(-1, *[1] * (obs.dim() - 1))
    return obs + noise


def raw_chunk(policy: Policy, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
    """The algorithm's own ``[-1, 1]`` chunk for ``obs``: ``[B, H, A]`` (single-agent)."""
    return policy.algo.act(obs, deterministic=deterministic).reshape(
        obs.shape[0], policy.horizon, -1)


def user_error(fn: Any, *fragments: str) -> str:
    """Run ``fn``; it must raise a one-line UserError holding every fragment."""
    with pytest.raises(UserError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# --------------------------------------------------------------------------- loading


def test_load_single_agent(sac_run: Path) -> None:
    import rlzoo

    policy = rlzoo.load_policy(sac_run)  # the lazy public name
    assert isinstance(policy, Policy) and isinstance(policy, torch.nn.Module)
    assert policy.step == 300
    assert policy.horizon == 1 and not policy.multi_agent
    assert policy.config["algo"]["name"] == "sac" and policy.config["env"]["id"] == "Pendulum-v1"
    assert policy.spec == EnvSpec(obs_dim=3, act_dim=1, action_low=(-2.0,), action_high=(2.0,),
                                  max_episode_steps=200)
    assert not any(p.requires_grad for p in policy.parameters())
    # the weights are the run's own: those of its final checkpoint, not a fresh initialisation
    ckpt = load_checkpoint(list_checkpoints(sac_run / "checkpoints")[-1])
    assert ckpt["counters"]["step"] == 300
    modules = ckpt["algo"]["modules"]
    loaded = torch.nn.Module.state_dict(policy.algo)
    assert set(loaded) == set(modules)
    for name, value in modules.items():  # a single run's checkpoint: the seed axis, [1, ...]
        assert value.shape[0] == 1 and torch.equal(loaded[name], value[0]), name


def test_actions_in_env_units_single_agent(sac_run: Path) -> None:
    policy = load_policy(sac_run)
    obs = env_obs(policy, 6)
    action = policy(obs)
    assert action.shape == (6, 1) and action.dtype == torch.float32
    raw = raw_chunk(policy, obs)[:, 0]
    # what the training env adapter (RescaleAction inside SingleAgentVecEnv) executes for raw
    env = SingleAgentVecEnv("Pendulum-v1", 1, 0)
    expected = env.envs[0].action(raw.numpy())
    env.close()
    np.testing.assert_allclose(action.numpy(), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(action.numpy(), 2.0 * raw.numpy(), rtol=0, atol=1e-6)
    assert (action - raw).abs().max() > 1e-3  # the scaling happened
    assert action.abs().max() <= 2.0


def test_actions_in_env_units_and_chunks(chunk_run: Path) -> None:
    policy = load_policy(chunk_run)
    assert policy.horizon == 4 and policy.spec.action_high == (3.0,)
    obs = env_obs(policy, 5)
    chunk = policy.chunk(obs)
    assert chunk.shape == (5, 4, 1)
    assert torch.equal(policy(obs), chunk[:, 0])  # forward = the chunk's first action
    raw = raw_chunk(policy, obs)  # [B, H, A]
    env = SingleAgentVecEnv("InvertedPendulum-v5", 1, 0)
    rescale = env.envs[0]
    for h in range(4):  # every action of the chunk as the env would execute it
        np.testing.assert_allclose(chunk[:, h].numpy(), rescale.action(raw[:, h].numpy()),
                                   rtol=0, atol=1e-6)
    env.close()
    np.testing.assert_allclose(chunk.numpy(), 3.0 * raw.numpy(), rtol=0, atol=1e-6)
    assert (chunk[:, 1:] - chunk[:, :1]).abs().max() > 0  # the chunk's actions differ


def test_multi_agent_shapes_and_env_units(maddpg_run: Path) -> None:
    policy = load_policy(maddpg_run)
    assert policy.multi_agent and policy.horizon == 1 and policy.step == 137
    assert policy.obs_shape == (3, 18) and policy.act_shape == (3, 5)
    obs = env_obs(policy, 4)
    action = policy(obs)
    assert action.shape == (4, 3, 5)
    assert policy.chunk(obs).shape == (4, 1, 3, 5)
    raw = policy.algo.act(obs, deterministic=True)  # [B, N, A] in [-1, 1]
    env = make_env(OmegaConf.create(policy.config), 4, 0)  # the PettingZoo adapter's own map
    expected = env._check_action(raw.numpy())
    env.close()
    np.testing.assert_allclose(action.numpy(), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(action.numpy(), (raw.numpy() + 1) / 2, rtol=0, atol=1e-6)
    assert action.min() >= 0.0 and action.max() <= 1.0


def test_determinism_and_sampling(sac_run: Path) -> None:
    policy = load_policy(sac_run)
    obs = env_obs(policy, 8)
    first = policy(obs)
    assert torch.equal(first, policy(obs))
    assert torch.equal(first, policy.to_env_units(raw_chunk(policy, obs)[:, 0]))
    stochastic = load_policy(sac_run, deterministic=False)
    torch.manual_seed(1)
    a, b = stochastic(obs), stochastic(obs)
    assert not torch.equal(a, b) and not torch.equal(a, first)
    assert a.abs().max() <= 2.0 and b.abs().max() <= 2.0


def test_numpy_act(sac_run: Path, maddpg_run: Path) -> None:
    policy = load_policy(sac_run)
    obs = env_obs(policy, 3)
    batch = policy.act(obs.numpy())
    assert isinstance(batch, np.ndarray) and batch.dtype == np.float32 and batch.shape == (3, 1)
    np.testing.assert_array_equal(batch, policy(obs).numpy())
    one = policy.act(obs[1].tolist())  # one observation [O] (any array-like) -> [A]
    assert one.shape == (1,)
    np.testing.assert_allclose(one, batch[1], rtol=0, atol=1e-7)
    multi = load_policy(maddpg_run)
    mobs = env_obs(multi, 2)
    assert multi.act(mobs.numpy()).shape == (2, 3, 5)
    assert multi.act(mobs[0].numpy()).shape == (3, 5)


class ConstantAlgo(Algorithm):
    """Acts with a constant in every entry (padding included), to check the policy's map."""

    multi_agent = True

    def __init__(self, spec: EnvSpec, value: float) -> None:
        super().__init__(spec, 0.99, 1)  # gamma, n_step: unused here
        self.value = value

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return torch.full((*obs.shape[:-1], self.spec.act_dim), self.value)


def test_padding_is_zero_and_bounds_per_agent() -> None:
    spec = EnvSpec(obs_dim=2, act_dim=3, n_agents=2, state_dim=4, act_dims=(3, 1),
                   action_low=(0.0, 0.0, -1.0, -2.0, 0.0, 0.0),
                   action_high=(1.0, 1.0, 1.0, 2.0, 0.0, 0.0))
    obs = torch.zeros(2, 2, 2)
    high = Policy(ConstantAlgo(spec, 1.0), spec)(obs)
    low = Policy(ConstantAlgo(spec, -1.0), spec)(obs)
    mid = Policy(ConstantAlgo(spec, 0.5), spec)(obs)
    assert high.tolist() == [[[1.0, 1.0, 1.0], [2.0, 0.0, 0.0]]] * 2
    assert low.tolist() == [[[0.0, 0.0, -1.0], [-2.0, 0.0, 0.0]]] * 2
    assert mid.tolist() == [[[0.75, 0.75, 0.5], [1.0, 0.0, 0.0]]] * 2
    beyond = Policy(ConstantAlgo(spec, 7.0), spec)(obs)  # clipped to the bounds
    assert torch.equal(beyond, high)
    unknown = dataclasses.replace(spec, action_low=(), action_high=())  # bounds unknown: [-1, 1]
    assert Policy(ConstantAlgo(unknown, 0.5), unknown)(obs).tolist() == \
        [[[0.5, 0.5, 0.5], [0.5, 0.0, 0.0]]] * 2


# --------------------------------------------------------------------------- policy.pt


def test_policy_file_holds_no_replay_or_optimizer(sac_run: Path) -> None:
    path = sac_run / "policy.pt"
    record = torch.load(path, weights_only=True)
    assert set(record) == {"format", "step", "config", "spec", "weights"}
    assert record["format"] == 1 and record["step"] == 300
    policy = load_policy(sac_run)
    assert set(record["weights"]) == set(torch.nn.Module.state_dict(policy.algo))
    assert not any("optim" in key or "buffer" in key for key in record["weights"])
    checkpoint = list_checkpoints(sac_run / "checkpoints")[-1]
    assert path.stat().st_size * 3 < checkpoint.stat().st_size, \
        (path.stat().st_size, checkpoint.stat().st_size)


# --------------------------------------------------------------------------- errors


def rewrite(sac_run: Path, tmp_path: Path, change: Any) -> Path:
    """A copy of the SAC run's policy.pt with ``change(record)`` applied, in its own dir."""
    record = torch.load(sac_run / "policy.pt", weights_only=True)
    change(record)
    save_checkpoint(tmp_path / "policy.pt", record)
    return tmp_path


def test_missing_run_dir_or_policy_file(tmp_path: Path) -> None:
    user_error(lambda: load_policy(tmp_path / "nope"), "does not exist", "nope")
    user_error(lambda: load_policy(tmp_path), "not an rlzoo run directory")  # an empty dir
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 0\n")  # a run from before policy.pt
    # no checkpoint either: rlzoo.evaluate would fail too, so it is not suggested
    user_error(lambda: load_policy(tmp_path), "has no policy.pt", "first checkpoint",
               "no trained policy")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "step_0000000001.pt").write_bytes(b"")  # a run before policy.pt
    user_error(lambda: load_policy(tmp_path), "has no policy.pt", "python -m rlzoo.evaluate")


def test_corrupt_or_truncated_file(sac_run: Path, tmp_path: Path) -> None:
    (tmp_path / "policy.pt").write_bytes(b"this is not a torch file")
    user_error(lambda: load_policy(tmp_path), "not a zip archive", "damaged")
    whole = (sac_run / "policy.pt").read_bytes()
    (tmp_path / "policy.pt").write_bytes(whole[: len(whole) // 2])
    user_error(lambda: load_policy(tmp_path), "policy.pt", "damaged")
    torch.save({"hello": 1}, tmp_path / "policy.pt")
    user_error(lambda: load_policy(tmp_path), "not an rlzoo checkpoint")


def test_unknown_format_or_missing_parts(sac_run: Path, tmp_path: Path) -> None:
    rewrite(sac_run, tmp_path, lambda r: r.update(format=2))
    user_error(lambda: load_policy(tmp_path), "format 2", "does not know")
    rewrite(sac_run, tmp_path, lambda r: r.pop("weights"))
    user_error(lambda: load_policy(tmp_path), "not a policy file", "no weights")


def test_nonfinite_weights(sac_run: Path, tmp_path: Path) -> None:
    def poison(record: dict[str, Any]) -> None:
        record["weights"]["actor.net.layers.0.weight"][0, 0] = float("nan")

    rewrite(sac_run, tmp_path, poison)
    user_error(lambda: load_policy(tmp_path), "NaN or inf", "actor.net.layers.0.weight")


def test_weights_that_do_not_fit_the_config(sac_run: Path, tmp_path: Path) -> None:
    rewrite(sac_run, tmp_path, lambda r: r["config"]["algo"]["actor"].update(hidden=[8]))
    user_error(lambda: load_policy(tmp_path), "do not fit the config", "actor.net")
    rewrite(sac_run, tmp_path, lambda r: r["spec"].update(obs_dim=5))
    user_error(lambda: load_policy(tmp_path), "do not fit the config")


def test_untrusted_target_is_refused(sac_run: Path, tmp_path: Path) -> None:
    def hostile(record: dict[str, Any]) -> None:
        record["config"]["algo"]["actor"]["_target_"] = "subprocess.Popen"

    rewrite(sac_run, tmp_path, hostile)
    user_error(lambda: load_policy(tmp_path), "algo.actor._target_", "subprocess.Popen",
               'pass trust=["subprocess"] to rlzoo.load_policy')
    user_error(lambda: load_policy(tmp_path, trust=["not a module"]), "not a module name")
    # trust given as one string names one module (not its letters): the trust check passes,
    # and Hydra's own target policy still refuses to build subprocess.Popen, in one line
    user_error(lambda: load_policy(tmp_path, trust="subprocess"), "cannot build algo=sac",
               "subprocess.Popen")


def test_bad_observations_and_export_path(sac_run: Path, tmp_path: Path) -> None:
    policy = load_policy(sac_run)
    user_error(lambda: policy(torch.zeros(4, 5)), "shape [B, 3]", "[4, 5]")
    user_error(lambda: policy(torch.zeros(3)), "shape [B, 3]")
    user_error(lambda: policy.export(tmp_path / "missing" / "p.pt2"), "does not exist")
    for name in ("pol.onnx", "pol.ONNX"):  # a torch.export archive under an ONNX name: refused
        user_error(lambda name=name: policy.export(tmp_path / name),
                   f"{name}: Policy.export writes a torch.export program, not ONNX",
                   "name the file pol.pt2")
        assert not (tmp_path / name).exists()
    user_error(lambda: load_policy(sac_run, device="tpu"), "device")


# --------------------------------------------------------------------------- export

CHILD = """
import sys
sys.modules["rlzoo"] = None  # any import of rlzoo now fails
import torch
for name in sys.argv[1:]:
    program = torch.export.load(name + ".pt2")
    keys = list(program.state_dict)  # the actor's weights only
    assert keys and not any("critic" in k or "target" in k for k in keys), keys
    module = program.module()
    for batch in (1, 7):
        obs = torch.load(f"{name}.obs{batch}.pt", weights_only=True)
        torch.save(module(obs), f"{name}.out{batch}.pt")
try:
    import rlzoo  # noqa: F401
except ImportError:
    print("rlzoo is not importable here")
"""


def test_export_runs_without_rlzoo(sac_run: Path, chunk_run: Path, maddpg_run: Path,
                                   tmp_path: Path) -> None:
    cases: dict[str, tuple[Policy, bool]] = {
        "sac": (load_policy(sac_run), False),
        "chunk": (load_policy(chunk_run), False),
        "chunk_whole": (load_policy(chunk_run), True),
        "maddpg": (load_policy(maddpg_run), False),
    }
    expected = {}
    for name, (policy, whole) in cases.items():
        assert policy.export(tmp_path / f"{name}.pt2", chunk=whole) == tmp_path / f"{name}.pt2"
        for batch in (1, 7):
            obs = env_obs(policy, batch, seed=batch)
            torch.save(obs, tmp_path / f"{name}.obs{batch}.pt")
            expected[name, batch] = policy.chunk(obs) if whole else policy(obs)
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "child.py", *cases], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rlzoo is not importable here" in proc.stdout
    for (name, batch), want in expected.items():
        got = torch.load(tmp_path / f"{name}.out{batch}.pt", weights_only=True)
        assert got.shape == want.shape, (name, batch, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert expected["chunk_whole", 7].shape == (7, 4, 1)
    assert expected["maddpg", 1].shape == (1, 3, 5)


def test_import_rlzoo_is_lazy() -> None:
    code = ("import sys, rlzoo; assert 'rlzoo.policy.policy' not in sys.modules, 'eager'; "
            "assert 'torch' not in sys.modules, 'torch'; from rlzoo import load_policy; "
            "import rlzoo.policy.policy; "
            "assert load_policy is rlzoo.policy.policy.load_policy; print('ok')")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
