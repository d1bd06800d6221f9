"""rlzoo's input normalizers against SimbaV2's official wrappers over a whole env stream (issue 42
item 2), not two updates with the normalizers off.

tests/fixtures/simbav2_normalizer_reference.npz holds 3,000 calls of an rlzoo Hopper training env
(random warm-up actions, 133 episodes ending by termination, next-step autoreset) and what the
official ``ObservationNormalizer`` and ``RewardNormalizer`` (github dojeon-ai/SimbaV2 at 14fafb2,
``scale_rl/agents/wrappers/normalization.py``, run unchanged by
scripts/simbav2_normalizer_reference.py, fed as its ``run_online.py`` feeds them) held after each
of their 2,866 updates: observation mean, var and count, the return statistics, ``max|G|`` and
the reward divisor. Here the same stream goes through rlzoo's own path
(``rlzoo.config.normalization``:
``pending`` and ``fold_collected`` before every action, into the normalizers ``build_algorithm``
attaches to ``algo=simbav2``) and every statistic and the divisor must match at every one of those
points. Dropping ``G_max`` from the divisor (it binds at 2,575 of them) or merging episodes' final
observations both fail it (test below).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlzoo.algos import EnvSpec
from rlzoo.config import normalization as normalize
from rlzoo.config.build import build_algorithm
from rlzoo.config.settings import read_settings
from rlzoo.envs.base import StepResult
from rlzoo.nets.normalizers import RewardScaler
from tests.from_yaml import composed

FIXTURE = Path(__file__).parent / "fixtures" / "simbav2_normalizer_reference.npz"
CPU = torch.device("cpu")


def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return dict(f)


def rlzoo_statistics(ref: dict[str, np.ndarray],
                     fold=normalize.fold_collected) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """The stream through rlzoo's run path; the statistics before each recorded call."""
    cfg = composed("algo=simbav2", "env=Hopper", "algo.actor.network.hidden_dim=8",
                   "critic.network.hidden_dim=8", f"algo.gamma={float(ref['gamma'])}",
                   f"normalize.reward_g_max={float(ref['g_max'])}")
    obs = ref["stream/obs"]
    algo = build_algorithm(cfg, EnvSpec(obs_dim=obs.shape[1], act_dim=3, max_episode_steps=1000),
                           read_settings(cfg).device)
    norm, scaler = algo.obs_normalizer, algo.reward_scaler
    assert norm is not None and isinstance(scaler, RewardScaler)
    wanted = set(ref["calls"].tolist())
    out: dict[str, list[np.ndarray]] = {k: [] for k in (
        "obs_mean", "obs_var", "obs_count", "ret_mean", "ret_var", "ret_max", "divisor")}
    last = None
    for t in range(len(ref["stream/reward"])):
        fold(algo, obs[t][None], None, last, CPU)  # before acting on obs[t]
        if t in wanted:
            for key, value in (("obs_mean", norm.mean), ("obs_var", norm.var),
                               ("obs_count", norm.count), ("ret_mean", scaler.ret_stats.mean),
                               ("ret_var", scaler.ret_stats.var), ("ret_max", scaler.ret_max),
                               ("divisor", scaler.scale())):
                out[key].append(value.double().numpy().copy())
        last = normalize.pending(StepResult(
            obs=obs[t + 1][None], reward=ref["stream/reward"][t:t + 1],
            terminated=ref["stream/terminated"][t:t + 1],
            truncated=ref["stream/truncated"][t:t + 1],
            reset_step=ref["stream/reset_step"][t:t + 1]))
    return {k: np.asarray(v) for k, v in out.items()}


def mismatches(ref: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> list[str]:
    """Statistics that differ from the official ones anywhere (float32 arithmetic there)."""
    bad = []
    for key, value in ours.items():
        want = ref[f"official/{key}"].reshape(value.shape)
        if not np.allclose(value, want, rtol=2e-5, atol=1e-8):
            first = int(np.argmax(~np.isclose(value, want, rtol=2e-5, atol=1e-8).reshape(
                len(value), -1).all(axis=1)))
            bad.append(f"{key} from record {first}")
    return bad


def test_the_stream_has_what_the_check_needs() -> None:
    ref = reference()
    ended = ref["stream/terminated"] | ref["stream/truncated"]
    assert len(ref["stream/reward"]) == 3000 and ended.sum() >= 100  # many episode ends
    assert ref["calls"].size == 3000 - ended.sum() - 1  # one record per transition but the first
    # the G_max term decides the divisor at most of the points, the variance at some
    binding = ref["official/ret_max"] / ref["g_max"] > np.sqrt(ref["official/ret_var"] + 1e-8)
    assert 0.5 * binding.size < binding.sum() < binding.size


def test_every_statistic_matches_the_official_wrappers_at_every_step() -> None:
    ref = reference()
    assert mismatches(ref, rlzoo_statistics(ref)) == []


def fold_final_observations(algo, obs, state, last, device):  # type: ignore[no-untyped-def]
    """The mutation: an episode's final observation merged into the observation statistics
    (``fold_collected`` with every observation kept; the rewards as it merges them)."""
    if last is None:
        return
    algo.obs_normalizer.update(normalize.float32_on(obs, device))
    envs = np.flatnonzero(last["valid"])
    if envs.size:
        algo.reward_scaler.update(torch.as_tensor(last["reward"]), torch.as_tensor(last["ended"]),
                                  torch.as_tensor(envs))


@pytest.mark.parametrize("broken", ["no G_max", "final observations merged"])
def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    ref = reference()
    if broken == "no G_max":
        monkeypatch.setattr(RewardScaler, "scale",
                            lambda self: torch.sqrt(self.ret_stats.var + self.epsilon))
        ours = rlzoo_statistics(ref)
        assert mismatches(ref, ours) == ["divisor from record 0"]
    else:
        ours = rlzoo_statistics(ref, fold_final_observations)
        assert {m.split()[0] for m in mismatches(ref, ours)} == {
            "obs_mean", "obs_var", "obs_count"}
