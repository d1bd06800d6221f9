"""Seeds as a batch axis (``rlzoo.algos.seed_axis``): K seeds in one group never touch each other.

For every single-agent algorithm and critic kind: after several updates, perturbing seed 2's
batch leaves seeds 0 and 1's weights, optimizer moments, targets and buffers bit-identical (and
changes seed 2's); an update without randomness (TD3 without smoothing noise) gives each seed
what a single run of it gets; metrics are per seed; act draws per seed. The multi-agent
algorithms have the same checks in ``test_seed_group_marl.py``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial

import pytest
import torch

from rlzoo.algos import SAC, TD3, EnvSpec
from rlzoo.algos.base import Algorithm
from rlzoo.algos.dsac_t import DSACT
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.algos.seed_records import stack_records
from rlzoo.buffers import Batch
from rlzoo.nets import (
    CategoricalCritic,
    DeterministicActor,
    EnsembleCritic,
    GaussianCritic,
    TanhGaussianActor,
    TwinCritic,
)
from rlzoo.nets.critics import ActionSequenceCritic
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=5, act_dim=2)
K = 3
HIDDEN = [32, 32]


def sac(critic: Callable, cls: type = SAC) -> Algorithm:
    return cls(SPEC, actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN)),
               critic=critic,
               tuner=partial(AutoAlpha, **tuner_args("auto")),
               **algo_args(ALGO_FILES[cls.__name__]))


ALGO_FILES = {"SAC": "sac", "DSACT": "dsac_t", "SimbaV2": "simbav2"}


def td3(policy_noise: float = 0.2) -> Algorithm:
    return TD3(SPEC, actor=partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
               critic=partial(TwinCritic,
                              **critic_args("twin", hidden=HIDDEN, actor_reduce="first")),
               **algo_args("td3", policy_noise=policy_noise))


ALGOS: dict[str, tuple[Callable[[], Algorithm], int]] = {  # (builder, action width of a batch)
    "sac-twin": (lambda: sac(partial(TwinCritic, **critic_args("twin", hidden=HIDDEN))), 2),
    "redq-ensemble": (lambda: sac(partial(EnsembleCritic,
                                          **critic_args("ensemble", n=5, subset=2,
                                                        hidden=HIDDEN))), 2),
    "dsac_t-distributional": (lambda: sac(partial(DistributionalCritic,
                                                  **critic_args("distributional",
                                                                hidden=HIDDEN)), DSACT), 2),
    "sac-action_sequence": (
        lambda: sac(partial(ActionSequenceCritic,
                            **critic_args("action_sequence", horizon=3, hidden=HIDDEN))), 6),
    "td3": (td3, 2),
    "sac-categorical": (lambda: sac(partial(CategoricalCritic,
                                            **critic_args("categorical", atoms=11,
                                                          hidden=HIDDEN))), 2),
    "stac-gaussian": (
        lambda: sac(partial(GaussianCritic,
                            **critic_args("gaussian", pessimism=0.5, hidden=HIDDEN, layer_norm=True,
                                          dropout=0.1))), 2),
}


def members(make: Callable[[], Algorithm], seeds: range = range(K)) -> list[Algorithm]:
    out = []
    for seed in seeds:
        torch.manual_seed(seed)
        out.append(make())
    return out


def seed_batch(width: int, b: int = 16) -> Batch:
    g = torch.Generator().manual_seed(123)
    return Batch(
        obs=torch.randn(K, b, 5, generator=g), action=torch.rand(K, b, width, generator=g) * 2 - 1,
        reward=torch.randn(K, b, generator=g), next_obs=torch.randn(K, b, 5, generator=g),
        discount=torch.full((K, b), 0.99), terminated=torch.zeros(K, b),
    )


def every_state(algo: Algorithm) -> dict[str, torch.Tensor]:
    """Weights, targets, buffers and every optimizer moment, by name."""
    out = {f"module.{k}": v for k, v in torch.nn.Module.state_dict(algo).items()}
    for name, opt in algo.optimizers.items():
        for i, p in enumerate(opt.param_groups[0]["params"]):
            for key in ("exp_avg", "exp_avg_sq"):
                out[f"{name}.{i}.{key}"] = opt.state[p][key]
    return out


@pytest.mark.parametrize("name", list(ALGOS))
def test_perturbing_one_seed_leaves_the_others_bit_identical(name: str) -> None:
    make, width = ALGOS[name]
    a, b = stack_seeds(members(make)), stack_seeds(members(make))
    data = seed_batch(width)
    other = Batch(**{k: v.clone() for k, v in data.tensors().items()})
    other.obs[2] += 1.0
    other.reward[2] -= 3.0
    for _ in range(8):  # every phase: critic, actor, temperature, targets (delay 2 included)
        torch.manual_seed(7)
        metrics = a.update(data)
        torch.manual_seed(7)
        b.update(other)
    assert {k: tuple(v.shape) for k, v in metrics.items()} == {k: (K,) for k in metrics}
    state_a, state_b = every_state(a), every_state(b)
    assert state_a.keys() == state_b.keys() and len(state_a) > 10
    for key in state_a:
        x, y = state_a[key], state_b[key]
        if x.dim() == 0:  # shared scalars (the DSAC-T running std's "ready" flag per seed is [K])
            continue
        assert x.shape[0] == K, key
        assert torch.equal(x[:2], y[:2]), f"{key}: seed 2's batch changed seeds 0/1"
    changed = [k for k in state_a if state_a[k].dim() and not torch.equal(state_a[k][2],
                                                                          state_b[k][2])]
    assert any(k.startswith("module.critic.") for k in changed)
    assert any(k.startswith("module.actor.") for k in changed)
    assert any(".exp_avg" in k for k in changed)


def test_an_update_without_randomness_equals_each_seed_alone() -> None:
    """TD3 without target smoothing noise: slice k of the group after 4 updates (actor and
    targets step every 2nd) is what a single TD3 of seed k reaches on slice k of the batch."""
    group = stack_seeds(members(partial(td3, 0.0)))
    singles = members(partial(td3, 0.0))
    data = seed_batch(2)
    for _ in range(4):
        group.update(data)
    for k, single in enumerate(singles):
        mine = Batch(**{name: value[k] for name, value in data.tensors().items()})
        for _ in range(4):
            single.update(mine)
        want = torch.nn.Module.state_dict(single)
        got = group.seed_axis.weights(torch.nn.Module.state_dict(group), k)
        assert want.keys() == got.keys()
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-6, msg=key)


def test_initial_weights_are_each_seeds_single_run_weights() -> None:
    group = stack_seeds(members(ALGOS["sac-twin"][0]))
    for k, single in enumerate(members(ALGOS["sac-twin"][0])):
        want = torch.nn.Module.state_dict(single)
        got = group.seed_axis.weights(torch.nn.Module.state_dict(group), k)
        assert all(torch.equal(got[key], want[key]) for key in want)
    assert not torch.equal(group.actor.net.layers[0].weight[0], group.actor.net.layers[0].weight[1])


def test_dsac_t_running_std_is_kept_per_seed() -> None:
    make, width = ALGOS["dsac_t-distributional"]
    group = stack_seeds(members(make))
    data = seed_batch(width)
    data.reward[1] *= 100.0  # seed 1's returns are far wider: its running std must grow alone
    for _ in range(3):
        group.update(data)
    std = group.critic.running_std  # [K, E, 1]
    assert std.shape == (K, 2, 1) and bool(group.critic.running_std_ready.all())
    assert not torch.equal(std[0], std[1])


def test_act_draws_for_each_seed() -> None:
    group = stack_seeds(members(ALGOS["sac-twin"][0]))
    obs = torch.randn(4, 5).expand(K, 4, 5)  # the same observation for every seed
    torch.manual_seed(0)
    sampled = group.compute(group.act, obs)
    mode = group.compute(group.act, obs, True)
    assert sampled.shape == mode.shape == (K, 4, 2)
    assert not torch.equal(sampled[0], sampled[1])  # own weights and own noise
    single = members(ALGOS["sac-twin"][0])[1]
    torch.testing.assert_close(mode[1], single.act(obs[1], deterministic=True), rtol=0, atol=1e-6)


def test_one_seed_is_the_algorithm_unchanged() -> None:
    algo = members(ALGOS["sac-twin"][0], range(1))
    assert stack_seeds(algo) is algo[0] and algo[0].seed_axis.size == 1
    assert algo[0].actor.net.layers[0].weight.dim() == 3  # [E, in, out]: no seed axis


def test_the_group_is_one_object_the_algorithm_holds() -> None:
    """The seed axis is a field of each algorithm, not module-level state: two groups and a
    single run each hold their own (size, generators), and the seed axis's module keeps no
    registry of groups (issue 53 item 1)."""
    import rlzoo.algos.seed_axis as seed_axis_module

    generators = [torch.Generator().manual_seed(k) for k in range(K)]
    a = stack_seeds(members(ALGOS["sac-twin"][0]), generators)
    b = stack_seeds(members(ALGOS["sac-twin"][0]))
    single = members(ALGOS["sac-twin"][0], range(1))[0]
    assert (a.seed_axis.size, b.seed_axis.size, single.seed_axis.size) == (K, K, 1)
    assert a.seed_axis.generators == generators and b.seed_axis.generators == []
    assert len({id(x.seed_axis) for x in (a, b, single)}) == 3
    state = [name for name, value in vars(seed_axis_module).items() if not name.startswith("__")
             and isinstance(value, (dict, list, set, weakref.WeakKeyDictionary))]
    assert state == [], state


def test_the_seed_axis_of_one_seed_is_the_plain_algorithm() -> None:
    """The loop's one path at K = 1: acting and updating through SeedAxis with [1, ...] tensors
    gives bit for bit what the algorithm gives on its own (same weights, same random draws),
    with metrics [1]."""
    plain, through = members(ALGOS["sac-twin"][0], range(1)) + members(ALGOS["sac-twin"][0],
                                                                      range(1))
    axis = stack_seeds([through]).seed_axis
    data = seed_batch(2)
    one = Batch(**{name: value[0] for name, value in data.tensors().items()})
    for _ in range(3):
        torch.manual_seed(7)
        want = plain.update(one)
        torch.manual_seed(7)
        got = axis.update(through.update, stack_records([one]))
        assert want.keys() == got.keys()
        for key in want:
            assert got[key].shape == (1, *want[key].shape) and torch.equal(got[key][0], want[key])
    for key, value in torch.nn.Module.state_dict(plain).items():
        assert torch.equal(torch.nn.Module.state_dict(through)[key], value), key
    obs = torch.randn(4, 5)
    torch.manual_seed(3)
    want = plain.act(obs)
    torch.manual_seed(3)
    got = axis.call(through, through.act, stack_records([obs]))
    assert got.shape == (1, 4, 2) and torch.equal(got[0], want)


def test_stacking_an_updated_algorithm_is_refused() -> None:
    algos = members(ALGOS["td3"][0])
    data = seed_batch(2)
    algos[0].update(Batch(**{k: v[0] for k, v in data.tensors().items()}))
    with pytest.raises(ValueError, match="not been updated"):
        stack_seeds(algos)
