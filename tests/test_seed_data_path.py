"""A seed group's data path (``rlzoo.run.collect``): one act call, one env-step call, one
storage write per field for every seed, and each seed's part of it bit for bit its single run's.

Randomness drawn inside ``act`` and ``update`` comes from the process's generator as one draw of
``[K, ...]`` (``rlzoo.algos.seeds``), so a seed's actions after its warm-up are not its single
run's draws; everything else a seed owns is compared here: its envs, replay, loop arrays,
counters, warm-up generator, and the algorithm's state of that seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, run_cli
from test_resume_split import assert_identical

from rlzoo.run.checkpoint import checkpoint_path, load_checkpoint

FLASH_TINY = ["algo.actor.network.hidden_dim=8", "critic.network.hidden_dim=8",
              "critic.network.num_blocks=1", "algo.actor.network.num_blocks=1"]
COMMON = ["env=InvertedPendulum", "eval.every=0", "eval.episodes=1", "log.progress=false",
          "torch_threads=1", "algo.batch_size=16", "checkpoint.keep=5"]


def checkpoint_at(run_dir: Path, step: int) -> dict[str, Any]:
    return load_checkpoint(checkpoint_path(run_dir / "checkpoints", step))


def assert_seed_is_single_run(group: dict[str, Any], k: int, single: dict[str, Any]) -> None:
    """Seed k's part of the group's checkpoint equals the single run's checkpoint: its member
    part, and its slice of every tensor of the algorithm (weights, buffers, the noise state)."""
    assert_identical(group["members"][k], single["members"][0], f"members.{k}")
    modules = single["algo"]["modules"]
    assert modules.keys() == group["algo"]["modules"].keys()
    for name, value in modules.items():
        assert torch.equal(group["algo"]["modules"][name][k], value), name


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_a_seed_in_its_warmup_while_another_acts_is_its_single_run(tmp_path: Path) -> None:
    """FlashSAC, seeds 0 and 1 on InvertedPendulum (short random episodes, so their step counts
    part: each reset call is no step): at the checkpoint of step 60, seed 0 is at step 61 and
    has acted once (learning_starts=60), seed 1 is at 60 and has not. The one act call computed
    seed 1's action too, which advances its repeated noise; seed 1 must still be its single run,
    noise state (count 0) included."""
    args = ["algo=flashsac", *COMMON, *FLASH_TINY, "algo.learning_starts=60",
            "checkpoint.every=60", "total_steps=61"]
    proc = run_cli([*args, "seeds=2", "seed=0"], tmp_path / "group-s0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "seed=1"], tmp_path / "single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    group, single = checkpoint_at(tmp_path / "group-s0", 60), checkpoint_at(tmp_path / "single", 60)
    assert [m["counters"]["step"] for m in group["members"]] == [61, 60]
    count = group["algo"]["modules"]["exploration.count"]
    assert count.tolist() == [1, 0]  # seed 0 acted once, seed 1 never
    assert_seed_is_single_run(group, 1, single)


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_every_seed_of_a_warmup_group_is_its_single_run(tmp_path: Path) -> None:
    """SAC with 2 envs per seed, 3 seeds, the whole run in the warm-up (random actions from
    each seed's own generator): every seed's envs, replay (stored with one write per field for
    all seeds), open episodes and counters equal its single run's, bit for bit, though the
    seeds' step counts part (reset calls)."""
    args = ["algo=sac", *COMMON, *TINY, "num_envs=2", "algo.learning_starts=1000",
            "checkpoint.every=0", "total_steps=90"]
    proc = run_cli([*args, "seeds=3", "seed=4"], tmp_path / "group-s4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    group = load_checkpoint(sorted((tmp_path / "group-s4" / "checkpoints").glob("*.pt"))[-1])
    assert len({m["counters"]["step"] for m in group["members"]}) > 1  # the seeds parted
    for k in range(3):
        proc = run_cli([*args, f"seed={4 + k}"], tmp_path / f"single-{k}")
        assert proc.returncode == 0, proc.stderr[-3000:]
        single = load_checkpoint(
            sorted((tmp_path / f"single-{k}" / "checkpoints").glob("*.pt"))[-1])
        # a seed that reached total_steps before the slowest one stopped there, as alone
        assert_seed_is_single_run(group, k, single)


@pytest.mark.parametrize("envs", [1, 3])
def test_one_merge_for_every_seed_is_each_seeds_own_merge(envs: int) -> None:
    """``fold_seeds`` (one merge of the observation and reward statistics for all seeds of a
    group, seed by seed after an episode end or a reset call) leaves every statistic bit for
    bit where ``fold_collected`` seed after seed leaves it, over steps with and without ends."""
    from rlzoo.nets.normalizers import ObservationNormalizer, RewardScaler
    from rlzoo.run.normalize import fold_collected, fold_seeds

    class Holder(torch.nn.Module):  # what fold_* read of an algorithm
        normalizes, state_normalizer = True, None

        def __init__(self) -> None:
            super().__init__()
            self.obs_normalizer = ObservationNormalizer((2, 3), 1e-8)
            self.reward_scaler = RewardScaler(envs, 0.99, 5.0, 1e-8)

    K, rng, cpu = 3, np.random.default_rng(0), torch.device("cpu")
    one, many = Holder(), Holder()
    for holder in (one, many):  # stacked as a group's buffers are
        for name, buf in list(holder.named_buffers()):
            owner, _, leaf = name.rpartition(".")
            target = holder.get_submodule(owner) if owner else holder
            target._buffers[leaf] = torch.stack([buf] * K).clone()
    grouped = 0
    for t in range(30):
        obs = rng.normal(size=(K, envs, 2, 3)).astype(np.float32) * (t + 1)
        ended = rng.random((K, envs)) < 0.15
        valid = rng.random((K, envs)) > 0.1
        last = [{"reward": rng.normal(size=envs).astype(np.float32), "ended": ended[k] & valid[k],
                 "valid": valid[k]} for k in range(K)]
        for k in range(K):
            fold_collected(one, k, obs[k], None, last[k], cpu)
        fold_seeds(many, list(range(K)), obs, None, last, cpu)
        grouped += not any(r["ended"].any() for r in last)
    assert grouped >= 3  # some steps took the one-merge path
    for (name, a), b in zip(one.state_dict().items(), many.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(one.obs_normalizer.mean[0], one.obs_normalizer.mean[1])
