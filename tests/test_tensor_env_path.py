"""The device data path of the multi-agent tensor envs (``rlzoo.envs.tensor_env``: VMAS and the
batched MPE): the trainer steps them with ``step_device``, so the observations ``[E, N, O]`` and
the global state ``[E, S]`` stay tensors on the env's device, to the policy, the normalizers, the
finiteness check, the replay and the evaluation, and a run equals the numpy path's bit for bit.

What is checked: ``step_device`` against ``step`` step by step through autoresets and with an
``active`` mask (same numbers; tensors on the env's device; rewards and flags numpy); a NaN in a
tensor observation or state located in its training env; and whole runs of MADDPG and HASAC on
``env=vmas/navigation`` and ``env=mpe/simple_spread env.backend=batched`` (one a ``seeds=2``
group) with both normalizers, split mid-episode and resumed, against the same runs with
``keeps_tensors=False`` (the numpy path): every tensor of the final checkpoints (weights,
optimizers, replay with its state and agent rewards, envs, loop, counters, generators) and the
summaries' numbers, the final evaluation included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, read_summary
from test_resume_split import STATE_KEYS, assert_identical, final_checkpoint

from rlzoo.envs.tensor_env import TensorVecEnv
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint

VMAS = ["env=vmas/navigation", "env.kwargs.max_steps=20"]
MPE = ["env=mpe/simple_spread", "env.backend=batched"]


def make(kind: str, num_envs: int, seed: int = 0) -> TensorVecEnv:
    if kind == "vmas":
        pytest.importorskip("vmas")
        from rlzoo.envs.vmas_batched import VmasVecEnv

        return VmasVecEnv("navigation", num_envs, seed, max_steps=5)
    from rlzoo.envs.mpe_batched import BatchedMPE

    return BatchedMPE("simple_spread_v3", num_envs, seed, max_cycles=5)


def reference(env: TensorVecEnv, action: np.ndarray, active: np.ndarray | None) -> dict:
    """The step as ``step_tensors`` gives it, each field copied to the host on its own."""
    s = env.step_tensors(torch.as_tensor(action),
                         None if active is None else torch.as_tensor(active))
    return {name: getattr(s, name).cpu().numpy() for name in (
        "obs", "state", "reward", "agent_reward", "terminated", "truncated", "reset_step")}


@pytest.mark.parametrize("kind", ["vmas", "mpe"])
def test_step_device_and_step_are_step_tensors(kind: str) -> None:
    """Three envs of the same seed stepped with ``step_tensors`` (each field copied to the host
    here), ``step_device`` and ``step``, over three episodes (autoresets) and with an
    ``active`` mask: the same numbers in every field; ``step_device``'s observations and state
    float32 tensors on the env's device, the rest numpy of ``step``'s dtypes."""
    envs = [make(kind, 3, seed=4) for _ in range(3)]
    for env in envs:
        env.reset()
    rng, resets = np.random.default_rng(0), 0
    for t in range(18):
        action = rng.uniform(-1, 1, (3, *envs[0].act_shape)).astype(np.float32)
        active = None if t < 12 else np.array([True, t % 2 == 0, True])
        want = reference(envs[0], action, active)
        got, plain = envs[1].step_device(action, active), envs[2].step(action, active)
        for name, w in want.items():
            g, p = getattr(got, name), getattr(plain, name)
            if name in ("obs", "state"):
                assert torch.is_tensor(g) and g.dtype == torch.float32, name
                assert g.device == envs[1].device
                g = g.numpy()
            assert type(g) is np.ndarray and g.dtype == p.dtype == w.dtype, (name, g.dtype)
            assert np.array_equal(w, g) and np.array_equal(w, p), (t, name)
        pending = envs[0]._pending.numpy()
        assert np.array_equal(envs[1]._needs_reset, pending)
        assert np.array_equal(envs[2]._needs_reset, pending)
        resets += int(got.reset_step.sum())
    assert resets >= 6  # every env through at least two autoresets


def test_a_nan_in_a_tensor_state_is_found_in_its_env() -> None:
    """The finiteness check reads the tensors once and names the bad quantity and env."""
    from rlzoo.run.finite import check_env_output
    from rlzoo.run.signals import NonFiniteError

    obs, state = torch.zeros(2, 4, 3, 5), torch.zeros(2, 4, 15)
    check_env_output([0, 1], [0, 1], [7, 7], "vmas-navigation", lambda: "x", obs=obs,
                     state=state, reward=np.zeros((2, 4), np.float32))
    state[1, 2, 3] = float("nan")
    with pytest.raises(NonFiniteError, match="non-finite state .* training env 2 of seed 1 "
                                             "at step 7"):
        check_env_output([0, 1], [0, 1], [7, 7], "vmas-navigation", lambda: "x", obs=obs,
                         state=state, reward=np.zeros((2, 4), np.float32))


CASES = {
    "vmas-maddpg": ["algo=maddpg", *VMAS],
    "vmas-hasac-seeds2": ["algo=hasac", *VMAS, "seeds=2"],
    "mpe-maddpg": ["algo=maddpg", *MPE],
    "mpe-hasac": ["algo=hasac", *MPE],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_device_path_equals_the_numpy_path_and_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """A run stepped with ``step_device`` (tensors kept on the env's device) equals the run
    stepped with ``step`` (numpy) bit for bit, split at step 96 mid-episode and resumed to 160
    (module docstring); the collector saw tensors on one path and numpy on the other, and the
    device path never called the numpy ``step`` (training or evaluation)."""
    if "vmas" in case:
        pytest.importorskip("vmas")
    import rlzoo
    from rlzoo.run.collect import Collector

    args = [*CASES[case], "device=cpu", "num_envs=4", *TINY, "algo.learning_starts=40",
            "algo.batch_size=16", "algo.buffer_size=1000", "normalize.obs=true",
            "normalize.reward=true", "eval.every=0", "eval.episodes=2", "checkpoint.every=0",
            "log.progress=false", "seed=5", "torch_threads=1"]
    seen: set[tuple[type, type]] = set()
    numpy_steps: set[int] = set()  # TensorVecEnv.step's calls, by env count
    collect, step = Collector.collect, TensorVecEnv.step

    def spy(self: Collector) -> None:
        seen.add((type(self.obs), type(self.env_state)))
        collect(self)

    def numpy_step(self: TensorVecEnv, *a: Any, **kw: Any) -> Any:
        numpy_steps.add(self.num_envs)
        return step(self, *a, **kw)

    monkeypatch.setattr(Collector, "collect", spy)
    monkeypatch.setattr(TensorVecEnv, "step", numpy_step)
    finals = {}
    for tensors in (True, False):
        monkeypatch.setattr(TensorVecEnv, "keeps_tensors", tensors)
        run_dir = tmp_path / f"tensors-{tensors}"
        rlzoo.train(*args, "total_steps=96", run_dir=run_dir)
        split = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
        lengths = split["members"][0]["loop"]["episode_length"]
        limit = 20 if "vmas" in case else 25  # max_steps, max_cycles
        assert 0 < int(lengths.min()) and int(lengths.max()) < limit, lengths  # mid-episode
        rlzoo.resume(run_dir, "total_steps=160")
        finals[tensors] = (final_checkpoint(run_dir), read_summary(run_dir))
        kind = torch.Tensor if tensors else np.ndarray
        assert seen == {(kind, kind)}, seen
        assert numpy_steps == (set() if tensors else {4, 2}), numpy_steps
        seen.clear()
        numpy_steps.clear()
    (want, s_want), (got, s_got) = finals[False], finals[True]
    assert want["counters"]["step"] == 160 and want["algo"]["updates"] == 30
    for k, member in enumerate(want["members"]):
        stored = member["buffer"]["tensors"]
        assert stored["state"].abs().sum() > 0 and stored["agent_reward"].abs().sum() > 0, k
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    for key in ("total_steps", "updates", "episodes", "final_eval_return"):
        assert s_want[key] == s_got[key], key
