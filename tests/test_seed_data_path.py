"""A seed group's data path (``rlzoo.run.collect``): one act call, one env-step call, one
storage write per field for every seed, and each seed's part of it bit for bit its single run's.

Everything a seed owns is compared here: its envs, replay, loop arrays, counters, warm-up
generator, the generator its policy and updates draw from (its single run's process generator,
bit for bit) and the algorithm's state of that seed, before and past the warm-up: a CPU group
runs each seed's update and act with its single run's kernels and numbers (rlzoo.algos.seed_axis,
"in turn"), so a seed is its single run bit for bit (issue 43 item 3).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from test_resume_split import assert_identical

from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.store.checkpoint import checkpoint_path, load_checkpoint

FLASH_TINY = ["algo.actor.network.hidden_dim=8", "critic.network.hidden_dim=8",
              "critic.network.num_blocks=1", "algo.actor.network.num_blocks=1"]
COMMON = ["env=InvertedPendulum", "eval.every=0", "eval.episodes=1", "log.progress=false",
          "torch_threads=1", "algo.batch_size=16", "checkpoint.keep=5"]


def checkpoint_at(run_dir: Path, step: int) -> dict[str, Any]:
    return load_checkpoint(checkpoint_path(run_dir / "checkpoints", step))


def assert_seed_is_single_run(group: dict[str, Any], k: int, single: dict[str, Any]) -> None:
    """Seed k's part of the group's checkpoint equals the single run's checkpoint: its member
    part, its generator (the single run's process generator) and its slice of every tensor of
    the algorithm (weights, buffers, the noise state)."""
    mine = dict(group["members"][k])
    assert torch.equal(mine.pop("draws"), single["rng"]["torch"])
    assert_identical(mine, single["members"][0], f"members.{k}")
    modules = single["algo"]["modules"]
    assert modules.keys() == group["algo"]["modules"].keys()
    for name, value in modules.items():
        assert torch.equal(group["algo"]["modules"][name][k], value[0]), name  # both [K, ...]


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
def test_each_seeds_statistics_are_its_single_runs(envs: int) -> None:
    """``fold_seeds`` (the loop's one call for every live seed of a group: each seed's slices
    of the weights in place, as the seed axis runs any update of them) leaves every seed's
    statistics bit for bit where ``fold_collected`` leaves those of its single run, over steps
    with and without episode ends and reset calls, and with seeds that do not fold (a seed
    that reached ``total_steps``)."""
    from rlzoo.config.normalization import fold_collected, fold_seeds
    from rlzoo.nets.normalizers import ObservationNormalizer, RewardScaler

    class Holder(torch.nn.Module):  # what fold_* read of an algorithm
        normalizes, state_normalizer = True, None

        def __init__(self) -> None:
            super().__init__()
            self.obs_normalizer = ObservationNormalizer((2, 3), 1e-8)
            self.reward_scaler = RewardScaler(envs, 0.99, 5.0, 1e-8)

    K, rng, cpu = 3, np.random.default_rng(0), torch.device("cpu")
    alone = [Holder() for _ in range(K)]
    group = stack_seeds([Holder() for _ in range(K)])
    for t in range(30):
        obs = rng.normal(size=(K, envs, 2, 3)).astype(np.float32) * (t + 1)
        ended = rng.random((K, envs)) < 0.15
        valid = rng.random((K, envs)) > 0.1
        last = [{"reward": rng.normal(size=envs).astype(np.float32), "ended": ended[k] & valid[k],
                 "valid": valid[k]} for k in range(K)]
        live = np.arange(K) if t < 20 else np.array([0, 2])  # seed 1 stopped at step 20
        for k in live:
            fold_collected(alone[k], obs[k], None, last[k], cpu)
        fold_seeds(group, live, obs, None, last, cpu)
    for name, value in group.state_dict().items():
        assert value.shape[0] == K, name
        for k in range(K):
            assert torch.equal(value[k], alone[k].state_dict()[name]), (name, k)
    assert not torch.equal(alone[0].obs_normalizer.mean, alone[1].obs_normalizer.mean)


# Each algorithm past its warm-up, small: every algorithm family and what crosses its seeds
# (clipped gradients: coma; a random agent order drawn outside compute: hasac; MemberAdam:
# hasac; dropout: stac; batch norm and repeated noise: flashsac; an
# on-policy rollout: coma).
OFF_POLICY = ["algo.learning_starts=100", "algo.batch_size=16"]
PAST_WARMUP = {
    "flashsac": ["env=Pendulum", *FLASH_TINY, *OFF_POLICY],
    "sac": ["env=Pendulum", *TINY, *OFF_POLICY],
    "td3": ["env=Pendulum", *TINY, *OFF_POLICY],
    "dsac_t": ["env=Pendulum", *TINY, *OFF_POLICY],
    "stac": ["env=Pendulum", *TINY, *OFF_POLICY],  # dropout 0.01, a sampling evaluation
    "simbav2": ["env=Pendulum", *FLASH_TINY, *OFF_POLICY],
    "hasac": ["env=mpe/simple_spread", *TINY, *OFF_POLICY],
    "maddpg": ["env=mpe/simple_spread", *TINY, *OFF_POLICY],
    "coma": ["env=mpe/simple_spread", *TINY, "algo.rollout_steps=20", "algo.critic_steps=2"],
}


@pytest.mark.parametrize("algo", list(PAST_WARMUP))
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_a_seed_past_its_warmup_is_its_single_run(tmp_path: Path, algo: str) -> None:
    """seeds=2 from seed 3, 60 steps past the warm-up: seed 4 is its single run (seed=4) bit for
    bit: replay, counters, generator, every weight, buffer and optimizer moment of its slice, and
    its evaluation return."""
    group_past_warmup_is_single_run(tmp_path, [f"algo={algo}", *PAST_WARMUP[algo]])


def group_past_warmup_is_single_run(tmp_path: Path, overrides: list[str]) -> dict[str, Any]:
    """Train ``overrides`` as seeds=2 from seed 3 and as seed 4 alone, 160 steps; assert that
    seed 4 of the group is its single run bit for bit (its member part, generator, every tensor
    and optimizer moment of its slice, its evaluation return); the group's checkpoint."""
    args = ["eval.every=160", "eval.episodes=1", "log.progress=false", "torch_threads=1",
            "checkpoint.every=160", "total_steps=160", *overrides]
    proc = run_cli([*args, "seeds=2", "seed=3"], tmp_path / "group-s3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "seed=4"], tmp_path / "single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    group = checkpoint_at(tmp_path / "group-s3", 160)
    single = checkpoint_at(tmp_path / "single", 160)
    assert group["algo"]["updates"] == single["algo"]["updates"] > 0
    assert_seed_is_single_run(group, 1, single)
    for name, saved in single["algo"]["optimizers"].items():
        for index, moments in saved["state"].items():
            for key, value in moments.items():
                mine = group["algo"]["optimizers"][name]["state"][index][key]
                assert torch.equal(mine if mine.dim() == 0 else mine[1], value if value.dim() == 0
                                   else value[0]), f"{name}.{index}.{key}"
    returns = [json.loads((tmp_path / d / "summary.json").read_text())["final_eval_return"]
               for d in ("group-s4", "single")]
    assert returns[0] == returns[1]
    return group


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_a_sampling_evaluation_with_parting_episodes_is_each_seeds_own(tmp_path: Path) -> None:
    """STAC evaluates with the mean of 10 sampled actions, its noise drawn for the envs the policy
    is called on. On Hopper seed 3's 4 eval episodes end before seed 4's, so the group's last
    evaluation steps run envs that seed 3 has finished: seed 3 must still be called on its own
    running envs only, and its returns be its single run's. (All in the warm-up, so that the
    seeds' training clocks, which part here, do not matter.)"""
    args = ["algo=stac", "env=Hopper", "eval.every=0", "eval.episodes=4", "log.progress=false",
            "torch_threads=1", "checkpoint.every=0", "total_steps=150",
            "algo.learning_starts=1000", *TINY]
    proc = run_cli([*args, "seeds=2", "seed=3"], tmp_path / "group-s3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "seed=3"], tmp_path / "single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads((tmp_path / d / "summary.json").read_text())
                 for d in ("group-s3", "single")]
    assert summaries[0]["final_eval_return"] == summaries[1]["final_eval_return"]
    assert summaries[0]["final_eval_return_std"] == summaries[1]["final_eval_return_std"] > 0


class _Noisy(torch.nn.Module):
    """A module whose only state is a weight; its ``noisy`` draws with torch's own functions
    (and a dropout layer), as an algorithm's code does."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3, 4))
        self.drop = torch.nn.Dropout(0.3)
        self.updates, self.optimizers = 0, {}  # what stack_seeds reads

    def forward(self, fn: Any, *args: Any) -> Any:  # how compute calls fn (Algorithm's)
        return fn(*args)

    def noisy(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        like = x * self.weight
        return (torch.randn_like(like), torch.randn((5, *like.shape)), torch.rand(7),
                self.drop(like), like)


def test_each_seed_draws_its_single_runs_numbers() -> None:
    """Inside a group's call, seed k draws from its own generator exactly what one seed draws
    from the process's generator in that generator's state: normal noise, uniform noise and
    dropout masks, bit for bit, call after call, and a draw outside the call
    (``Algorithm.draw``) likewise; the process's own generator is left where it was."""
    K = 3
    generators = [torch.Generator().manual_seed(100 + k) for k in range(K)]
    group = stack_seeds([_Noisy() for _ in range(K)], generators)
    singles, states = [_Noisy() for _ in range(K)], [g.get_state() for g in generators]
    x = torch.randn(K, 3, 4)
    process = torch.get_rng_state()
    for _ in range(2):
        got = group.seed_axis.compute(group, group.noisy, [x])
        orders = group.seed_axis.draw(lambda: torch.randperm(9))
        assert torch.equal(torch.get_rng_state(), process)
        for k, single in enumerate(singles):
            torch.set_rng_state(states[k])
            want = single.noisy(x[k])
            assert torch.equal(orders[k], torch.randperm(9))
            states[k] = torch.get_rng_state()
            torch.set_rng_state(process)
            for g, w in zip(got, want):
                assert torch.equal(g[k], w)
            assert torch.equal(generators[k].get_state(), states[k])
    assert not torch.equal(got[0][0], got[0][1])


def test_a_group_call_that_raises_leaves_the_group_whole() -> None:
    """An exception inside one seed's call puts every weight back (the group's ``[K, ...]``
    tensors, not a seed's slice) and the process's generator where it was."""
    group = stack_seeds([_Noisy() for _ in range(2)],
                        [torch.Generator().manual_seed(k) for k in range(2)])
    process = torch.get_rng_state()

    def fails(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        group.seed_axis.compute(group, fails, [torch.zeros(2, 3)])
    assert group.weight.shape == (2, 3, 4) and isinstance(group.weight, torch.nn.Parameter)
    assert torch.equal(torch.get_rng_state(), process)


def test_a_call_inside_a_call_and_per_seed_python_values_are_refused() -> None:
    """A group run in turn refuses a compute call nested in another (it would slice the seed's
    slices again) and a function whose non-tensor output differs between seeds (one value
    would stand for all); equal non-tensor outputs pass through."""
    group = stack_seeds([_Noisy() for _ in range(2)],
                        [torch.Generator().manual_seed(k) for k in range(2)])
    compute = functools.partial(group.seed_axis.compute, group)
    x = torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="inside another compute call"):
        compute(lambda v: compute(lambda w: w, [v]), [x])
    with pytest.raises(TypeError, match="differ between seeds"):
        compute(lambda v: float(group.weight.sum()) + float(v.sum()),
                         [torch.stack([torch.zeros(3), torch.ones(3)])])
    out, label = compute(lambda v: (v + 1, "same"), [x])
    assert out.shape == (2, 3) and label == "same"
    assert group.weight.shape == (2, 3, 4)  # put back after the refusals


def test_a_checkpoints_seed_generator_is_checked() -> None:
    """A member's ``draws`` that is not a torch generator state is refused before loading."""
    from rlzoo.run.saved_state import check_run_state
    from rlzoo.store.extras import global_rng_state

    def state(draws: torch.Tensor) -> dict[str, Any]:
        member = {"counters": {"step": 0, "episodes": 0, "last_eval": None}, "draws": draws}
        return {"counters": {"step": 0, "update_credit": 0.0, "wall_time": 0.0},
                "algo": {"updates": 0}, "members": [member, member], "rng": global_rng_state()}

    check_run_state(state(torch.get_rng_state()), 0, 10.0)
    with pytest.raises(ValueError, match=r"members\.0\.draws has shape \[3\] where this run"):
        check_run_state(state(torch.zeros(3, dtype=torch.uint8)), 0, 10.0)


def test_a_group_checkpoint_without_seed_generators_resumes(tmp_path: Path) -> None:
    """A group's checkpoint from before the seeds' generators (no ``draws``) still resumes."""
    args = ["algo=sac", *COMMON, *TINY, "algo.learning_starts=40", "checkpoint.every=60"]
    run_dir = tmp_path / "group-s0"
    proc = run_cli([*args, "seeds=2", "total_steps=60"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = checkpoint_path(run_dir / "checkpoints", 60)
    state = load_checkpoint(path)
    for member in state["members"]:
        del member["draws"]
    torch.save(state, path)
    proc = run_cli([f"resume={run_dir}", "total_steps=90"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "from step_0000000060.pt at step 60" in proc.stderr
    assert json.loads((run_dir / "summary.json").read_text())["total_steps"] == 90


@pytest.mark.usefixtures("fresh_interpreters")
def test_a_batched_group_is_its_single_runs_only_through_the_warmup(tmp_path: Path) -> None:
    """``seed_kernels=batched``: one vmapped call for every seed, drawing from the process's
    generator. The warm-up is still each seed's single run, bit for bit; past it the seed is
    not (its policy noise is another stream), so the switch is what makes a group exact."""
    args = ["algo=sac", "env=Pendulum", "eval.every=0", "log.progress=false", "torch_threads=1",
            "checkpoint.every=130", "total_steps=130", *TINY, *OFF_POLICY]
    proc = run_cli([*args, "seeds=2", "seed=3", "seed_kernels=batched"], tmp_path / "group-s3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "seed=4"], tmp_path / "single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    group = checkpoint_at(tmp_path / "group-s3", 130)
    single = checkpoint_at(tmp_path / "single", 130)
    assert all("draws" not in m for m in group["members"])  # no per-seed generator to keep
    mine, alone = group["members"][1]["buffer"], single["members"][0]["buffer"]
    assert torch.equal(mine["tensors"]["action"][:100], alone["tensors"]["action"][:100])
    assert not torch.equal(mine["tensors"]["action"][100:130], alone["tensors"]["action"][100:130])
    weights = group["algo"]["modules"]["actor.net.layers.0.weight"]
    assert torch.isfinite(weights).all() and not torch.equal(
        weights[1], single["algo"]["modules"]["actor.net.layers.0.weight"][0])


def test_an_unknown_seed_kernels_value_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "env=Pendulum", "seeds=2", "seed_kernels=fast",
                    "total_steps=10"], tmp_path / "run")
    assert_user_error(proc, "seed_kernels must be exact or batched, got 'fast'")
    assert not (tmp_path / "run").exists()
