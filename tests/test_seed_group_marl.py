"""Seeds as a batch axis for MADDPG, HASAC, COMA and the PPO example: K = 3 members built under
seeds 0, 1, 2 and stacked (``rlzoo.algos.seed_axis.stack_seeds``) update as K independent runs.

* every metric is per seed, ``[K]``;
* perturbing seed 2's data leaves seeds 0 and 1 bit-identical (weights, targets, optimizer
  moments, MemberAdam's included) while seed 2 changes;
* where the update draws no randomness (MADDPG; PPO once its shuffle is fixed) the group's slice k
  equals a single run of seed k on slice k of the data;
* per-seed gradient clipping and MemberAdam's per-seed member steps against their single-run
  counterparts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

from examples.ppo import PPO
from rlzoo.algos import HASAC
from rlzoo.algos.base import Algorithm
from rlzoo.algos.seed_axis import clip_grad_norm_per_seed, stack_seeds
from rlzoo.nets import (
    CategoricalCritic,
    DistributionalCritic,
    EnsembleCritic,
    TanhGaussianActor,
)
from rlzoo.optim.adam import MemberAdam
from rlzoo.optim.entropy import FixedAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args
from tests.test_multi_agent_algos import (
    HETERO,
    SPEC,
    make_batch,
    make_coma,
    make_hasac,
    make_maddpg,
    make_rollout,
)
from tests.test_ppo_example import SPEC as PPO_SPEC
from tests.test_ppo_example import synthetic_rollout

K = 3


def ppo(**kwargs: Any) -> PPO:
    """The PPO example with two value members and four minibatches (seeded by the caller)."""
    return PPO(
        PPO_SPEC, actor=partial(TanhGaussianActor,
                                **actor_args("sac", hidden=[16, 16], activation="tanh")),
        critic=partial(EnsembleCritic,
                       **critic_args("ensemble", n=2, subset=2, actor_reduce="first",
                                     hidden=[16, 16], activation="tanh")),
        **algo_args("ppo", **{"epochs": 2, "num_minibatches": 4, **kwargs}),
    )


def ppo_data(seed: int) -> Any:
    return synthetic_rollout(seed + 1)


def batch_data(spec: Any) -> Callable[[int], Any]:
    def draw(seed: int) -> Any:
        torch.manual_seed(seed)
        return make_batch(spec)
    return draw


def rollout_data(spec: Any) -> Callable[[int], Any]:
    def draw(seed: int) -> Any:
        torch.manual_seed(seed)
        return make_rollout(spec)
    return draw


# (id, builder, data of one seed for a given draw index)
CASES = {
    "maddpg": (make_maddpg, batch_data(SPEC)),
    "maddpg_policy_hetero": (partial(make_maddpg, HETERO, others_actions="policy"),
                             batch_data(HETERO)),
    "hasac": (make_hasac, batch_data(SPEC)),
    # MASAC: every agent's member stepped at once (HASAC's actor_update=simultaneous)
    "masac_hetero": (partial(make_hasac, HETERO, actor_update="simultaneous"),
                     batch_data(HETERO)),
    "hasac_hetero_fixed_alpha": (partial(make_hasac, HETERO,
                                         tuner=partial(FixedAlpha,
                                                       **tuner_args("fixed", alpha=0.1))),
                                 batch_data(HETERO)),
    # the distributional centralized critics (DSAC-T's, nets/critics.py): HASAC's one critic,
    # MADDPG's one per agent (twin Gaussians each); their running stds are per seed too
    "hasac_distributional": (partial(make_hasac, critic=DistributionalCritic), batch_data(SPEC)),
    "maddpg_distributional_hetero": (partial(make_maddpg, HETERO, critic=DistributionalCritic),
                                     batch_data(HETERO)),
    "hasac_categorical_hetero": (partial(make_hasac, HETERO, critic=CategoricalCritic),
                                 batch_data(HETERO)),
    "maddpg_categorical": (partial(make_maddpg, critic=CategoricalCritic), batch_data(SPEC)),
    # max_grad_norm small enough that the clip acts (a clip across seeds would couple them)
    "coma": (partial(make_coma, critic_steps=3, target_update_every=2, max_grad_norm=0.1),
             rollout_data(SPEC)),
    "ppo": (ppo, ppo_data),
}


def build(make: Callable[..., Algorithm], seed: int) -> Algorithm:
    torch.manual_seed(seed)
    return make()


def build_group(make: Callable[..., Algorithm]) -> Algorithm:
    return stack_seeds([build(make, seed) for seed in range(K)])


def stack_data(items: list[Any]) -> Any:
    """K batches or rollouts -> one with a leading seed axis on every tensor field."""
    first = items[0]
    return type(first)(**{
        f.name: None if getattr(first, f.name) is None
        else torch.stack([getattr(x, f.name) for x in items])
        for f in dataclasses.fields(first)
    })


def snapshot(algo: Algorithm) -> dict[str, torch.Tensor]:
    """Every parameter (targets and temperatures included), floating buffer and optimizer
    moment (``exp_avg``, ``exp_avg_sq``: Adam's and MemberAdam's), each ``[K, ...]``, cloned."""
    out = {f"param/{name}": p.detach().clone() for name, p in algo.named_parameters()}
    out.update({f"buffer/{name}": b.clone() for name, b in algo.named_buffers()
                if b.is_floating_point()})
    names = {p: name for name, p in algo.named_parameters()}
    for opt_name, opt in algo.optimizers.items():
        for p, state in opt.state.items():
            for key in ("exp_avg", "exp_avg_sq"):
                out[f"{opt_name}/{names[p]}/{key}"] = state[key].clone()
    return out


def run_group(make: Callable[..., Algorithm], data: Callable[[int], Any], updates: int,
              perturb: bool) -> tuple[Algorithm, list[dict[str, torch.Tensor]]]:
    """``updates`` group updates on stacked data; with ``perturb``, seed 2 gets other data.
    torch is re-seeded identically before every update."""
    algo = build_group(make)
    metrics = []
    for u in range(updates):
        items = [data(100 * u + k) for k in range(K)]
        if perturb:
            items[2] = data(100 * u + 50)
        batch = stack_data(items)
        torch.manual_seed(1000 + u)
        metrics.append(algo.update(batch))
    return algo, metrics


# ---------------------------------------------------------------------------- (1) per-seed metrics


@pytest.mark.parametrize("case", list(CASES))
def test_group_update_returns_one_value_per_seed(case: str) -> None:
    make, data = CASES[case]
    algo, metrics = run_group(make, data, updates=2, perturb=False)
    assert algo.seed_axis.size == K and algo.updates == 2
    for name, value in metrics[-1].items():
        assert torch.is_tensor(value) and value.shape == (K,), (name, value.shape)
        assert torch.isfinite(value).all(), name
        assert not value.requires_grad, name
    # acting goes through compute as the loop does: one action per seed
    one = data(0)  # a rollout's first row of observations, or a batch's first five
    obs = torch.stack([one.obs[0] if algo.on_policy else one.obs[:5] for _ in range(K)])
    action = algo.compute(algo.act, obs)
    assert action.shape[0] == K and action.shape[1:] == algo.compute(algo.act, obs, True).shape[1:]
    assert action.abs().max() <= 1.0
    if algo.on_policy:
        explored, pre_tanh = algo.compute(algo.explore, obs)
        assert explored.shape == pre_tanh.shape == action.shape
        assert torch.equal(explored, torch.tanh(pre_tanh))


# ---------------------------------------------------------------------------- (2) independence


@pytest.mark.parametrize("case", list(CASES))
def test_perturbing_one_seeds_data_leaves_the_other_seeds_bit_identical(case: str) -> None:
    make, data = CASES[case]
    clean, clean_metrics = run_group(make, data, updates=3, perturb=False)
    dirty, dirty_metrics = run_group(make, data, updates=3, perturb=True)
    before = snapshot(build_group(make))
    a, b = snapshot(clean), snapshot(dirty)
    assert a.keys() == b.keys()
    assert any("exp_avg" in name for name in a)
    if isinstance(clean, HASAC):
        assert any(name.startswith("actor/") for name in a)  # MemberAdam's moments are checked
    for name in a:
        assert a[name].shape[0] == K, name
        for k in (0, 1):
            assert torch.equal(a[name][k], b[name][k]), (name, k)
        moved = name not in before or not torch.equal(before[name][2], a[name][2])
        if moved:  # whatever training changed for seed 2 depends on seed 2's data
            assert not torch.equal(a[name][2], b[name][2]), name
    moved_params = [n for n in a if n.startswith("param/") and not torch.equal(before[n], a[n])]
    assert moved_params  # the check above was not vacuous
    for name in clean_metrics[-1]:
        assert torch.equal(clean_metrics[-1][name][:2], dirty_metrics[-1][name][:2]), name


# ---------------------------------------------------------------------------- (3) group = K runs


def assert_group_matches_singles(make: Callable[..., Algorithm], data: Callable[[int], Any],
                                 updates: int, patch: Callable[[Algorithm, int | None], None]
                                 = lambda algo, k: None) -> None:
    group = build_group(make)
    patch(group, None)
    singles = [build(make, k) for k in range(K)]
    for k, single in enumerate(singles):
        patch(single, k)
    for u in range(updates):
        items = [data(100 * u + k) for k in range(K)]
        group_metrics = group.update(stack_data(items))
        for k, single in enumerate(singles):
            metrics = single.update(items[k])
            assert metrics.keys() == group_metrics.keys()
            for name, value in metrics.items():
                torch.testing.assert_close(group_metrics[name][k], value, atol=1e-6, rtol=0,
                                           msg=name)
    grouped = snapshot(group)
    for k, single in enumerate(singles):
        for name, value in snapshot(single).items():
            torch.testing.assert_close(grouped[name][k], value, atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize("others", ["buffer", "policy"])
def test_maddpg_group_slice_equals_a_single_run_of_that_seed(others: str) -> None:
    """MADDPG's update draws no randomness: slice k of the group is seed k's own run."""
    assert_group_matches_singles(partial(make_maddpg, HETERO, others_actions=others),
                                 batch_data(HETERO), updates=4)


def test_ppo_group_slice_equals_a_single_run_of_that_seed_with_the_same_shuffles() -> None:
    """PPO's only randomness in ``update`` is the shuffle: given seed k the same row orders as
    the group's seed k, the group's slice k is seed k's own run (per-seed advantage
    normalization and gradient clipping included: max_grad_norm is small enough to clip)."""
    rows = 8 * 2  # T * E of synthetic_rollout
    g = torch.Generator().manual_seed(7)
    perms = [[torch.randperm(rows, generator=g) for _ in range(K)] for _ in range(2 * 3)]

    def patch(algo: Algorithm, k: int | None) -> None:
        epochs = iter(perms)
        algo.shuffle = lambda n, device: (  # type: ignore[method-assign]
            torch.stack(next(epochs)) if k is None else next(epochs)[k])

    assert_group_matches_singles(partial(ppo, max_grad_norm=0.05), ppo_data, updates=3,
                                 patch=patch)


def test_ppo_group_shuffles_each_seeds_rows_on_its_own() -> None:
    algo = build_group(ppo)
    torch.manual_seed(0)
    orders = algo.shuffle(16, torch.device("cpu"))
    assert orders.shape == (K, 16)
    assert all(sorted(order) == list(range(16)) for order in orders.tolist())
    assert len({tuple(order) for order in orders.tolist()}) == K


# ---------------------------------------------------------------------------- HASAC's orders


def test_hasac_group_draws_an_agent_order_per_seed_and_steps_each_member_once() -> None:
    algo = build_group(make_hasac)
    orders = []
    for u in range(6):
        algo.update(stack_data([batch_data(SPEC)(10 * u + k) for k in range(K)]))
        assert len(algo.update_order) == K
        assert all(sorted(order) == [0, 1, 2] for order in algo.update_order)
        orders.append(algo.update_order)
    assert any(len({tuple(o) for o in order}) > 1 for order in orders), orders
    for state in algo.actor_optimizer.state.values():
        assert state["step"].shape == (K, 3)
        assert state["step"].eq(6.0).all()


# ---------------------------------------------------------------------------- (4) the primitives


def test_clip_grad_norm_per_seed_is_the_single_run_clip_on_every_slice() -> None:
    torch.manual_seed(0)
    shapes = [(K, 4, 5), (K, 5), (K, 2, 3, 3)]
    params = [torch.nn.Parameter(torch.randn(shape)) for shape in shapes]
    unused = torch.nn.Parameter(torch.randn(K, 2))  # no gradient: skipped
    scale = torch.tensor([0.01, 1.0, 10.0])  # seed 0 under the limit, seeds 1 and 2 over it
    for p in params:
        p.grad = torch.randn(p.shape) * scale.view(K, *([1] * (p.dim() - 1)))
    max_norm = 1.5
    expected = []
    for k in range(K):
        slices = [torch.nn.Parameter(p.detach()[k].clone()) for p in params]
        for s, p in zip(slices, params):
            s.grad = p.grad[k].clone()
        torch.nn.utils.clip_grad_norm_(slices, max_norm)
        expected.append([s.grad for s in slices])
    clip_grad_norm_per_seed([*params, unused], max_norm)
    assert unused.grad is None
    for k in range(K):
        for p, grad in zip(params, expected[k]):
            torch.testing.assert_close(p.grad[k], grad, rtol=1e-6, atol=1e-7)
    norms = torch.stack([torch.cat([p.grad[k].flatten() for p in params]).norm()
                         for k in range(K)])
    assert norms[0] < max_norm and torch.allclose(norms[1:], torch.full((2,), max_norm))


@pytest.mark.parametrize("same_member", [False, True])
def test_member_adam_in_a_group_is_k_member_adams(same_member: bool) -> None:
    """Stacked ``[K, M, ...]`` parameters: seed k's slice steps member ``members[k]`` with seed
    k's own moments and step counts, exactly as K separate MemberAdams."""
    torch.manual_seed(0)
    members = 3
    singles = [[torch.nn.Parameter(torch.randn(members, 4, 2)),
                torch.nn.Parameter(torch.randn(members, 2))] for _ in range(K)]
    optimizers = [MemberAdam(ps, members, lr=1e-2) for ps in singles]
    grouped = [torch.nn.Parameter(torch.randn(members, 4, 2)),
               torch.nn.Parameter(torch.randn(members, 2))]
    group_opt = MemberAdam(grouped, members, lr=1e-2)
    with torch.no_grad():  # what stack_seeds does: same parameter objects, [K, ...] data
        for i, p in enumerate(grouped):
            p.data = torch.stack([ps[i].detach().clone() for ps in singles])
    for step in range(7):
        chosen = [step % members] * K if same_member else [(step + k) % members for k in range(K)]
        for i, p in enumerate(grouped):
            p.grad = torch.randn(p.shape)
            for k in range(K):
                singles[k][i].grad = p.grad[k].clone()
        if step == 4:  # a parameter without gradient keeps its step count
            grouped[1].grad = None
            for k in range(K):
                singles[k][1].grad = None
        group_opt.step(chosen)  # the members' shape [K] says the parameters' (no guess)
        for k in range(K):
            optimizers[k].step(chosen[k])
    for i, p in enumerate(grouped):
        state = group_opt.state[p]
        assert state["step"].shape == (K, members)
        for k in range(K):
            single = optimizers[k].state[singles[k][i]]
            assert torch.equal(p.detach()[k], singles[k][i].detach()), (i, k)
            assert torch.equal(state["exp_avg"][k], single["exp_avg"]), (i, k)
            assert torch.equal(state["exp_avg_sq"][k], single["exp_avg_sq"]), (i, k)
            assert torch.equal(state["step"][k], single["step"]), (i, k)
    with pytest.raises(ValueError, match="2 member"):
        grouped[0].grad = torch.zeros_like(grouped[0])
        group_opt.step([0, 1])


def test_member_adam_takes_the_seed_axis_from_the_members_it_is_given() -> None:
    """MemberAdam holds no seed count and does not guess the seed axis from a parameter's shape:
    a single HASAC steps one member index (step counts [M]), a group one per seed ([K, M])."""
    single, group = build(make_hasac, 0), build_group(make_hasac)
    assert not hasattr(single.actor_optimizer, "seeds") and group.seed_axis.size == K
    single.update(batch_data(SPEC)(0))
    group.update(stack_data([batch_data(SPEC)(k) for k in range(K)]))
    for algo, lead in ((single, ()), (group, (K,))):
        assert isinstance(algo.actor_optimizer, MemberAdam)
        for state in algo.actor_optimizer.state.values():
            assert state["step"].shape == (*lead, 3)
    with pytest.raises(ValueError, match="one member"):  # one index for [K, M, ...] weights
        group.actor_optimizer.step(0)
