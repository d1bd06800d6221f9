"""The batch-norm parts alone (rlzoo/nets/batch_norm.py): the layers' values, running statistics
and gradients against torch's BatchNorm1d and sb3-contrib's BatchRenorm, the trunk's layout and
shapes, when batch statistics are used, and the joint [s; s'] critic pass."""

from __future__ import annotations

import functools

import pytest
import torch

from rlzoo.nets import BatchNormMLP, EnsembleBatchNorm, EnsembleBatchRenorm, TwinCritic
from rlzoo.nets.batch_norm import batch_norm_layers, batch_statistics, halves, joint_pass
from rlzoo.nets.categorical import DiscreteReturn
from rlzoo.nets.critics import Critic
from tests.from_yaml import critic, critic_args

E, B, D = 2, 16, 5


def renorm(warmup: int = 100_000, members: int = E, dim: int = D) -> EnsembleBatchRenorm:
    return EnsembleBatchRenorm(members, dim, momentum=0.01, eps=1e-3, rmax=3.0, dmax=5.0,
                               warmup_steps=warmup)


def affine(layer: EnsembleBatchNorm) -> None:
    """Gains and biases other than 1 and 0, so that the test sees them applied."""
    with torch.no_grad():
        layer.weight.copy_(torch.rand_like(layer.weight) + 0.5)
        layer.bias.copy_(torch.randn_like(layer.bias))


def test_batch_norm_is_torchs_per_member() -> None:
    """Train mode: torch.nn.BatchNorm1d's output, input and weight gradients and running
    statistics (per member, over three batches); eval mode: its output from them."""
    layer = EnsembleBatchNorm(E, D, momentum=0.1, eps=1e-5)
    affine(layer)
    refs = [torch.nn.BatchNorm1d(D, momentum=0.1, eps=1e-5) for _ in range(E)]
    for e, ref in enumerate(refs):
        ref.weight.data.copy_(layer.weight[e, 0])
        ref.bias.data.copy_(layer.bias[e, 0])
    for step in range(3):
        x = (torch.randn(E, B, D) * 3 + step).requires_grad_()
        x_ref = x.detach().clone().requires_grad_()
        with batch_statistics(layer):
            y = layer(x)
        y_ref = torch.stack([ref(x_ref[e]) for e, ref in enumerate(refs)])
        torch.testing.assert_close(y, y_ref)
        grad = torch.randn_like(y)
        y.backward(grad)
        y_ref.backward(grad)
        torch.testing.assert_close(x.grad, x_ref.grad)
        for e, ref in enumerate(refs):
            torch.testing.assert_close(layer.weight.grad[e, 0], ref.weight.grad)
            torch.testing.assert_close(layer.running_mean[e, 0], ref.running_mean)
            torch.testing.assert_close(layer.running_var[e, 0], ref.running_var)
            ref.weight.grad = None
        layer.weight.grad = None
    x = torch.randn(E, B, D)
    for ref in refs:
        ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(layer(x), torch.stack([r(x[e]) for e, r in enumerate(refs)]))


def ctb_renorm(x: torch.Tensor, state: dict[str, torch.Tensor], scale: torch.Tensor,
               bias: torch.Tensor, warmup: int) -> torch.Tensor:
    """sb3-contrib 2.9.2's BatchRenorm.forward in training mode, transcribed (one member,
    ``x [B, F]``; ``state``: ra_mean, ra_var, steps, updated in place)."""
    mean, var = x.mean(0), x.var(0)
    std = (var + 1e-3).sqrt()
    if state["steps"] > warmup:
        running_std = (state["ra_var"] + 1e-3).sqrt()
        r = (std / running_std).detach().clamp(1 / 3.0, 3.0)
        d = ((mean - state["ra_mean"]) / running_std).detach().clamp(-5.0, 5.0)
        centre, spread = mean - d * var.sqrt() / r, var / r**2
    else:
        centre, spread = mean, var
    state["ra_mean"] += 0.01 * (mean.detach() - state["ra_mean"])
    state["ra_var"] += 0.01 * (var.detach() - state["ra_var"])
    state["steps"] += 1
    return scale * ((x - centre) / (spread + 1e-3).sqrt()) + bias


def test_batch_renorm_is_sb3_contribs_formula() -> None:
    """Through the warm-up (plain batch norm with the unbiased variance) and after it (r and d
    clipped, no gradient through them): outputs, gradients, running statistics and the step
    counter equal the transcription of sb3-contrib's layer, per member. The batches drift, so
    r and d are clipped on some features after the warm-up."""
    warmup = 2
    layer = renorm(warmup)
    affine(layer)
    states = [{"ra_mean": torch.zeros(D), "ra_var": torch.ones(D), "steps": 0} for _ in range(E)]
    scales = [layer.weight[e, 0].detach().clone().requires_grad_() for e in range(E)]
    clipped = False
    for step in range(6):
        x = (torch.randn(E, B, D) * (1 + 3 * step) + 4 * step).requires_grad_()
        x_ref = x.detach().clone().requires_grad_()
        with batch_statistics(layer):
            y = layer(x)
        y_ref = torch.stack([ctb_renorm(x_ref[e], states[e], scales[e], layer.bias[e, 0].detach(),
                                        warmup) for e in range(E)])
        torch.testing.assert_close(y, y_ref)
        grad = torch.randn_like(y)
        y.backward(grad)
        y_ref.backward(grad)
        torch.testing.assert_close(x.grad, x_ref.grad)
        for e in range(E):
            torch.testing.assert_close(layer.weight.grad[e, 0], scales[e].grad)
            torch.testing.assert_close(layer.running_mean[e, 0], states[e]["ra_mean"])
            torch.testing.assert_close(layer.running_var[e, 0], states[e]["ra_var"])
            scales[e].grad = None
        layer.weight.grad = None
        assert int(layer.steps) == step + 1
        if step > warmup:
            sigma_b = (x.detach().var(1, keepdim=True) + 1e-3).sqrt()
            clipped |= bool(((sigma_b / (layer.running_var + 1e-3).sqrt()) > 3.0).any())
    assert clipped, "no r reached its bound: the clip was not exercised"


def test_batch_renorm_equals_sb3_contrib_itself() -> None:
    """sb3-contrib's own BatchRenorm1d (when installed: the peer benchmark installs it), member 0
    of the ensemble layer, before and after its warm-up, and in evaluation."""
    layers = pytest.importorskip("sb3_contrib.common.torch_layers")
    ref = layers.BatchRenorm1d(D, eps=1e-3, momentum=0.01, warmup_steps=2)
    layer = renorm(2, members=1)
    affine(layer)
    ref.scale.data.copy_(layer.weight[0, 0])
    ref.bias.data.copy_(layer.bias[0, 0])
    for step in range(5):
        x = torch.randn(B, D) * (1 + step) + step
        with batch_statistics(layer):
            y = layer(x[None])[0]
        torch.testing.assert_close(y, ref(x))
    torch.testing.assert_close(layer.running_var[0, 0], ref.ra_var)
    ref.eval()
    x = torch.randn(B, D)
    with torch.no_grad():
        torch.testing.assert_close(layer(x[None])[0], ref(x))


def test_the_warmup_is_plain_batch_norm_bit_for_bit_and_no_host_branch() -> None:
    """Before the warm-up ends r = 1 and d = 0 exactly: the layer's output is the plain
    (unbiased-variance) batch norm's, bit for bit; the branch is a torch.where on the device
    counter, so a traced update (make_fx, as a CUDA graph captures it) switches by itself."""
    layer = renorm(warmup=1, members=1)
    x = torch.randn(1, B, D) * 2 + 1
    with batch_statistics(layer):
        y = layer(x)
    mean, var = x.mean(1, keepdim=True), x.var(1, keepdim=True)
    assert torch.equal(y, (x - mean) / torch.sqrt(var + 1e-3))

    from torch.fx.experimental.proxy_tensor import make_fx

    def step(x: torch.Tensor) -> torch.Tensor:
        with batch_statistics(traced):
            return traced(x)

    traced, eager = renorm(warmup=1, members=1), renorm(warmup=1, members=1)
    graph = make_fx(step)(x)  # traced at step 0, inside the warm-up (the trace runs it once)
    with batch_statistics(eager):
        eager(x)
    for i in range(4):  # steps 1 (warm-up), 2, 3, 4 (renormalizing): the graph follows
        batch = torch.randn(1, B, D) * (i + 1) + 3 * i
        with batch_statistics(eager):
            want = eager(batch)
        torch.testing.assert_close(graph(batch), want)
        assert torch.equal(traced.running_var, eager.running_var)
    assert int(eager.steps) == int(traced.steps) == 5


def test_the_running_statistics_are_used_outside_the_block() -> None:
    layer = renorm()
    affine(layer)
    x = torch.randn(E, B, D) * 3
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    y = layer(x)  # no block: running statistics, nothing updated
    assert all(torch.equal(v, layer.state_dict()[k]) for k, v in before.items())
    torch.testing.assert_close(y, (x - 0) / torch.sqrt(torch.ones(1) + 1e-3) * layer.weight
                               + layer.bias)
    with batch_statistics(layer):
        assert layer.batch_stats
        with batch_statistics(layer):  # nested: the outer block keeps it on
            pass
        assert layer.batch_stats
        layer(x)
    assert not layer.batch_stats and int(layer.steps) == 1
    assert not torch.equal(layer.running_mean, before["running_mean"])
    with pytest.raises(ValueError, match="at least 2"):
        with batch_statistics(layer):
            layer(x[:, :1])


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="momentum"):
        EnsembleBatchNorm(1, 3, momentum=0.0, eps=1e-3)
    with pytest.raises(ValueError, match="rmax >= 1"):
        EnsembleBatchRenorm(1, 3, momentum=0.01, eps=1e-3, rmax=0.5, dmax=5.0, warmup_steps=0)


def make_mlp(members: int = E, out: int = 3) -> BatchNormMLP:
    return BatchNormMLP(members, 4, out, hidden=[8, 6], activation="relu",
                        norm=functools.partial(EnsembleBatchRenorm, momentum=0.01, eps=1e-3,
                                               rmax=3.0, dmax=5.0, warmup_steps=100))


def test_the_trunk_normalizes_the_input_and_after_each_activation() -> None:
    net = make_mlp()
    kinds = [type(m).__name__ for m in net.layers]
    assert kinds == ["EnsembleBatchRenorm", "EnsembleLinear", "ReLU", "EnsembleBatchRenorm",
                     "EnsembleLinear", "ReLU", "EnsembleBatchRenorm", "EnsembleLinear"]
    assert [m.running_mean.shape for m in batch_norm_layers(net)] == [(E, 1, 4), (E, 1, 8),
                                                                       (E, 1, 6)]
    shared, own = torch.randn(B, 4), torch.randn(E, B, 4)
    assert net(shared).shape == net(own).shape == (E, B, 3)
    with batch_statistics(net):
        y = net(own)
    y[0].sum().backward()  # member 0's output: no gradient reaches member 1
    for p in net.parameters():
        assert p.grad[1].abs().sum() == 0 and p.grad[0].abs().sum() > 0


def test_a_batch_norm_critic_and_actor_build_from_the_net_yaml() -> None:
    from tests.from_yaml import composed

    cfg = composed("algo=sac", "net=batch_renorm", "critic.hidden=[8,8]",
                   "algo.actor.hidden=[6]")
    from hydra.utils import instantiate

    twin = instantiate(cfg.critic)(3, 2)
    actor = instantiate(cfg.algo.actor)(3, 2)
    assert [m.running_mean.shape[-1] for m in batch_norm_layers(twin)] == [5, 8, 8]
    assert [m.running_mean.shape[-1] for m in batch_norm_layers(actor)] == [3, 6]
    assert all(m.warmup_steps == 100_000 and m.rmax == 3.0 for m in batch_norm_layers(twin))


# ----------------------------------------------------------------------------- the joint pass


def bn_twin() -> TwinCritic:
    return critic("twin", hidden=[8], network=functools.partial(
        BatchNormMLP, hidden=[8], activation="relu",
        norm=functools.partial(EnsembleBatchNorm, momentum=0.1, eps=1e-3)))(3, 2)


def test_the_joint_pass_is_one_pass_over_both_halves() -> None:
    critic_a, critic_b = bn_twin(), bn_twin()
    critic_b.load_state_dict(critic_a.state_dict())
    obs, action = torch.randn(B, 3), torch.rand(B, 2)
    next_obs, next_action = torch.randn(B, 3) + 3, torch.rand(B, 2)
    q, next_q = joint_pass(critic_a, obs, action, next_obs, next_action)
    with batch_statistics(critic_b):
        both = critic_b(torch.cat([obs, next_obs]), torch.cat([action, next_action]))
    assert q.shape == next_q.shape == (2, B)
    assert torch.equal(q, both[:, :B]) and torch.equal(next_q, both[:, B:])
    for a, b in zip(batch_norm_layers(critic_a), batch_norm_layers(critic_b)):
        assert torch.equal(a.running_mean, b.running_mean)  # one update, of the 2B rows
    # the s half's loss reaches the weights through the s' rows' share of the statistics
    q.sum().backward()
    alone = bn_twin()
    alone.load_state_dict(critic_a.state_dict())
    with batch_statistics(alone):
        alone(obs, action).sum().backward()
    first = next(critic_a.parameters())
    assert not torch.allclose(first.grad, next(alone.parameters()).grad)
    assert not any(m.batch_stats for m in batch_norm_layers(critic_a))  # the block ended


def test_halves_split_records_on_the_batch_axis() -> None:
    value = DiscreteReturn(torch.arange(12.0).view(3, 4), torch.ones(3, 4))
    first, second = halves(value, 1)
    assert first.atoms.shape == (3, 1) and second.atoms.shape == (3, 3)
    assert torch.equal(second.atoms, value.atoms[:, 1:])


@pytest.mark.parametrize("kind", ["twin", "ensemble", "categorical", "tqc"])
def test_a_split_critic_computes_what_its_methods_compute(kind: str) -> None:
    """next_value and td_loss equal their halves' (outputs, then *_from), so the joint pass
    trains the same critic kind."""
    built = critic(kind, hidden=[8], **({"subset": 10} if kind == "ensemble" else {}))(3, 2)
    assert built.joins_passes()
    obs, action = torch.randn(B, 3), torch.rand(B, 2)
    out = built.outputs(obs, action)
    assert out.shape[1] == B
    nv = built.next_value(obs, action)
    nv_from = built.next_value_from(out)
    if isinstance(nv, DiscreteReturn):
        assert torch.equal(nv.atoms, nv_from.atoms) and torch.equal(nv.probs, nv_from.probs)
        target = nv * 0.9 + 0.1
    else:
        assert torch.equal(nv, nv_from)
        target = nv * 0.9 + 0.1
    loss, q = built.td_loss(obs, action, target)
    loss_from, q_from = built.td_loss_from(out, target)
    assert torch.equal(loss, loss_from) and torch.equal(q, q_from)


@pytest.mark.parametrize("kind", ["distributional", "gaussian"])
def test_kinds_without_a_split_say_so(kind: str) -> None:
    built = critic(kind, hidden=[8])(3, 2)
    assert not built.joins_passes() and not Critic.joins_passes()
    assert critic_args(kind)  # the YAML exists
