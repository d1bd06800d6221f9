"""Every algorithm's update can be captured as a CUDA graph: emulated on the CPU (tests/capture.py:
one update traced with make_fx, replayed on later batches, compared bit for bit with eager
updates), and on CUDA for real (marked ``cuda``, skipped without a GPU). Also: the device paths
that make an update capturable (learning rates from a device clock, HASAC's device permutation
and per-member Adam) compute what the CPU's host paths compute, and a CPU run is what it was."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from rlzoo.algos import HASAC, FlashSAC, SimbaV2
from rlzoo.algos.schedules import warmup_cosine
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.optim.adam import MemberAdam
from rlzoo.run.accel import GraphedUpdate, make_capturable
from tests.capture import CASES, TracedUpdate, batches, build, spec_of, state_tensors

# Per case: overrides that make every phase come round within a short test (REDQ's actor steps
# every 20 critic steps by default; the capture does not depend on the period).
SHORT = {"redq": ("algo.policy_delay=2",)}
UPDATES = {"coma": 24, "td3": 12, "redq": 12, "flashsac": 12, "crossq": 15}


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module, **tol: float) -> None:
    sa, sb = state_tensors(a), state_tensors(b)  # type: ignore[arg-type]
    assert sa.keys() == sb.keys()
    for key in sa:
        if tol:
            torch.testing.assert_close(sa[key].double(), sb[key].double(), msg=key, **tol)
        else:
            assert torch.equal(sa[key], sb[key]), key


def eager_and_traced(name: str, device: str = "cpu", warmup: int = 1
                     ) -> tuple[list[dict[str, torch.Tensor]], list[dict[str, torch.Tensor]],
                                torch.nn.Module, torch.nn.Module, TracedUpdate]:
    """Two copies of case ``name``, both capturable; one updated eagerly, the other through
    :class:`TracedUpdate`, each update after the same ``torch.manual_seed``."""
    extra = SHORT.get(name, ())
    eager, traced = build(name, device, 0, *extra), build(name, device, 0, *extra)
    make_capturable(eager)
    make_capturable(traced)
    update = TracedUpdate(traced, warmup=warmup)
    eager_metrics, traced_metrics = [], []
    for i, item in enumerate(batches(name, eager, UPDATES.get(name, 8), device)):
        torch.manual_seed(1000 + i)
        eager_metrics.append(eager.update(item))
        torch.manual_seed(1000 + i)
        traced_metrics.append(update(item))
    return eager_metrics, traced_metrics, eager, traced, update


@pytest.mark.parametrize("name", list(CASES))
def test_a_replayed_update_equals_the_eager_one(name: str) -> None:
    eager_metrics, traced_metrics, eager, traced, update = eager_and_traced(name)
    assert update.replays >= 3, "too few replays to show anything"
    assert traced.updates == eager.updates
    assert_same_state(eager, traced)
    for want, got in zip(eager_metrics, traced_metrics):
        for key, value in got.items():  # a replay's metrics are this update's, not the trace's
            assert torch.equal(value, want[key]), key


def stacked(items: list[list[Any]]) -> list[Any]:
    """K seeds' inputs (one list per seed) as a group's inputs, the seed axis first."""
    out = []
    for row in zip(*items):
        names = [f.name for f in dataclasses.fields(row[0])
                 if isinstance(getattr(row[0], f.name), torch.Tensor)]
        out.append(dataclasses.replace(row[0], **{
            name: torch.stack([getattr(x, name) for x in row]) for name in names}))
    return out


@pytest.mark.parametrize("name", ["sac", "flashsac", "hasac", "coma", "crossq"])
def test_a_seed_groups_replayed_update_equals_the_eager_one(name: str) -> None:
    """A group of two seeds (``seeds=2``: the update vmapped over the seed axis, HASAC's
    per-seed agent orders and member steps) is captured as well as a single run."""
    extra = SHORT.get(name, ())
    eager, traced = (stack_seeds([build(name, "cpu", seed, *extra) for seed in (0, 1)])
                     for _ in range(2))
    make_capturable(eager)
    make_capturable(traced)
    update = TracedUpdate(traced, warmup=1)
    n = UPDATES.get(name, 8)
    for i, item in enumerate(stacked([batches(name, eager, n, seed=s) for s in (1, 2)])):
        torch.manual_seed(i)
        eager.update(item)
        torch.manual_seed(i)
        update(item)
    assert update.replays >= 3 and traced.seed_axis.size == 2
    assert_same_state(eager, traced)


def old_simbav2_rates(self: SimbaV2) -> None:
    """SimbaV2's learning rates as they were set before (Python floats, every update)."""
    factor = 1.0 - (1.0 - self.lr_decay_to) * min(self.updates / self.lr_decay_updates, 1.0)
    for name, opt in self.optimizers.items():
        for group in opt.param_groups:
            group["lr"] = self.lr_schedule.initial[name] * factor


def old_flashsac_rates(self: FlashSAC) -> None:
    """FlashSAC's learning rates as they were set before (Python floats, every update)."""
    for name, opt in self.optimizers.items():
        k = self.updates if name == "critic" else -(-self.updates // self.policy_delay)
        factor = warmup_cosine(k, self.lr_init_fraction, self.lr_end_fraction,
                               self.lr_warmup_updates, self.lr_decay_updates)
        for group in opt.param_groups:
            group["lr"] = self.lr_schedule.initial[name] * factor


OLD_RATES = {"simbav2": (SimbaV2, old_simbav2_rates), "flashsac": (FlashSAC, old_flashsac_rates)}


@pytest.mark.parametrize("name", list(OLD_RATES))
def test_a_host_side_learning_rate_diverges_from_its_replay(name: str,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The emulation catches what capture would freeze: with the old Python-float rates the
    replays keep the traced update's rate and part from the eager updates."""
    cls, old = OLD_RATES[name]
    monkeypatch.setattr(cls, "set_learning_rates", old)
    with pytest.raises(AssertionError):
        test_a_replayed_update_equals_the_eager_one(name)


def test_a_host_side_agent_order_diverges_from_its_replay(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """HASAC's per-member Adam on the host (the CPU path: members and step counts read on the
    host) would be frozen by capture; the emulation catches it (the trace refuses the host
    read outright)."""
    monkeypatch.setattr(MemberAdam, "on_device", lambda self: False)
    with pytest.raises((AssertionError, RuntimeError)):
        test_a_replayed_update_equals_the_eager_one("hasac")


@pytest.mark.parametrize("name", list(OLD_RATES))
def test_cpu_runs_keep_the_learning_rates_they_had(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU (not capturable) the schedule still sets exactly the old Python floats: the
    updates equal, bit for bit, those of the code before the rates became tensors."""
    ours, theirs = build(name), build(name)
    cls, old = OLD_RATES[name]
    theirs.set_learning_rates = old.__get__(theirs)  # type: ignore[method-assign]
    for i, item in enumerate(batches(name, ours, 10)):
        torch.manual_seed(i)
        ours.update(item)
        torch.manual_seed(i)
        theirs.update(item)
        for opt_ours, opt_theirs in zip(ours.optimizers.values(), theirs.optimizers.values()):
            assert float(opt_ours.param_groups[0]["lr"]) == opt_theirs.param_groups[0]["lr"]
    state = {k: v for k, v in state_tensors(theirs).items() if not k.endswith("/lr")}
    mine = {k: v for k, v in state_tensors(ours).items() if not k.endswith("/lr")}
    assert state.keys() == mine.keys()
    assert all(torch.equal(state[k], mine[k]) for k in state)


@pytest.mark.parametrize("name", ["simbav2", "flashsac", "hasac"])
def test_the_device_path_computes_the_host_paths_update(name: str) -> None:
    """The capturable path (rates from the device clock, HASAC's masked per-member Adam) makes
    the same updates as the CPU's host path, up to float rounding."""
    host, device = build(name), build(name)
    make_capturable(device)
    for i, item in enumerate(batches(name, host, 8)):
        torch.manual_seed(i)
        host.update(item)
        torch.manual_seed(i)
        device.update(item)
    assert_same_state(host, device, rtol=1e-5, atol=1e-6)


def test_learning_rates_follow_the_clock_through_a_checkpoint() -> None:
    """A loaded checkpoint sets the schedule's clock to its update count, and the rates (the
    tensors a captured graph reads) stay the same objects."""
    algo = build("flashsac")
    make_capturable(algo)
    rates = dict(algo.lr_schedule.rates)
    for item in batches("flashsac", algo, 5):
        algo.update(item)
    state = algo.state_dict()
    fresh = build("flashsac")
    make_capturable(fresh)
    fresh_rates = dict(fresh.lr_schedule.rates)
    fresh.load_state_dict(state)
    assert int(fresh.lr_schedule.clock) == 5 == fresh.updates
    for name, opt in fresh.optimizers.items():
        assert opt.param_groups[0]["lr"] is fresh_rates[name]
        assert opt.param_groups[0]["capturable"]
    fresh.set_learning_rates()
    algo.set_learning_rates()
    for name in rates:
        assert math.isclose(float(fresh_rates[name]), float(rates[name]), rel_tol=1e-15)


def test_hasac_draws_its_agent_order_on_the_device_off_the_cpu() -> None:
    """Off the CPU the permutation is drawn on the weights' device (emulated with the meta
    device: nothing is read on the host); on the CPU it is the host randperm, as before."""
    algo = build("hasac")
    orders = algo.draw_orders(torch.device("meta"))
    assert orders.device.type == "meta" and orders.shape == (algo.n_agents,)
    torch.manual_seed(5)
    cpu = algo.draw_orders(torch.device("cpu"))
    torch.manual_seed(5)
    assert torch.equal(cpu, torch.randperm(algo.n_agents))


# --------------------------------------------------------------------------- CUDA, for real
@pytest.mark.cuda
@pytest.mark.parametrize("name", list(CASES))
def test_a_graphed_update_equals_the_eager_one_on_cuda(name: str) -> None:
    """Each algorithm's update captured as CUDA graphs (rlzoo.run.accel.GraphedUpdate) and
    replayed makes the updates the same code makes eagerly on the same GPU."""
    extra = SHORT.get(name, ())
    eager, graphed = build(name, "cuda", 0, *extra), build(name, "cuda", 0, *extra)
    make_capturable(eager)
    make_capturable(graphed)
    update = GraphedUpdate(graphed)
    items = batches(name, eager, UPDATES.get(name, 8) + 4 * 2, "cuda")
    for i, item in enumerate(items):
        torch.manual_seed(1000 + i)
        eager.update(item)
        torch.manual_seed(1000 + i)
        update(item)
    torch.cuda.synchronize()
    assert update.graphs, "nothing was captured"
    assert graphed.updates == eager.updates == len(items)
    assert_same_state(eager, graphed, rtol=1e-4, atol=1e-5)


@pytest.mark.cuda
def test_hasac_on_cuda_reads_no_agent_order_from_the_host() -> None:
    algo = build("hasac", "cuda")
    orders = algo.draw_orders(torch.device("cuda"))
    assert orders.is_cuda and sorted(orders.tolist()) == list(range(algo.n_agents))
    assert isinstance(algo, HASAC)


# --------------------------------------------------------------------------- the acting step
ACTING = [name for name in CASES if name != "coma"]  # COMA acts on-policy (explore)


def act_inputs(name: str, algo: Any, n: int) -> list[torch.Tensor]:
    """``n`` observation batches ``[E, *obs_shape]`` for ``algo.act``; E the envs of FlashSAC's
    repeated noise (its stateful path), else 3."""
    spec = spec_of(name)
    noise = getattr(getattr(algo, "exploration", None), "noise", None)
    E = noise.shape[0] if noise is not None else 3
    shape = (spec.n_agents, spec.obs_dim) if spec.multi_agent else (spec.obs_dim,)
    g = torch.Generator().manual_seed(7)
    return [torch.randn(E, *shape, generator=g) * 2 for _ in range(n)]


@pytest.mark.parametrize("name", ACTING)
def test_a_replayed_acting_step_equals_the_eager_one(name: str) -> None:
    """The acting step (rlzoo.run.accel.GraphedAct on CUDA) traced once and replayed on new
    observations draws the actions, and leaves the state (FlashSAC's repeated noise, its
    counters), that eager calls do: it reads nothing from the host that changes between steps."""
    eager, traced = build(name), build(name)
    graph = None
    for i, obs in enumerate(act_inputs(name, eager, 9)):
        torch.manual_seed(500 + i)
        want = eager.act(obs)
        torch.manual_seed(500 + i)
        if i < 3:
            got = traced.act(obs)
        elif graph is None:
            graph = make_fx(lambda o: traced.act(o))(obs)  # runs this step once, for real
            got = want
        else:
            got = graph(obs)
        assert torch.equal(want, got), (name, i)
        assert_same_state(eager, traced)
    assert graph is not None


@pytest.mark.cuda
@pytest.mark.parametrize("name", ACTING)
def test_a_graphed_acting_step_equals_the_eager_one_on_cuda(name: str) -> None:
    """rlzoo.run.accel.GraphedAct (warm-up, capture, replays) acts as eager calls do on the
    same GPU, random draws included, and leaves the same state."""
    from rlzoo.run.accel import GraphedAct

    eager, graphed = build(name, "cuda"), build(name, "cuda")
    act = GraphedAct(lambda o: graphed.act(o))
    for i, obs in enumerate(act_inputs(name, eager, 8)):
        obs = obs.cuda()
        torch.manual_seed(500 + i)
        want = eager.act(obs)
        torch.manual_seed(500 + i)
        got = act(obs)
        torch.testing.assert_close(want, got, rtol=1e-4, atol=1e-5, msg=f"{name} step {i}")
    torch.cuda.synchronize()
    assert act.graph is not None, "nothing was captured"
    assert_same_state(eager, graphed, rtol=1e-4, atol=1e-5)
