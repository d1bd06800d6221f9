"""compile=true, cudagraphs=true and the optimizer: the same updates, or a clear refusal."""

from __future__ import annotations

import copy
import shutil
from dataclasses import astuple
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import assert_user_error, read_summary, run_cli

from rlzoo.algos import HASAC, SAC, TD3
from rlzoo.algos.base import EnvSpec
from rlzoo.buffers.batch import Batch
from rlzoo.errors import UserError
from rlzoo.nets import DeterministicActor, TanhGaussianActor, TwinCritic
from rlzoo.optim.adam import Adam, adam
from rlzoo.optim.entropy import AutoAlpha
from rlzoo.run.accel import (
    Acceleration,
    CaptureFailed,
    GraphedUpdate,
    check_accel,
    compile_networks,
    make_capturable,
    resolve_accel,
    update_fn,
)
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=5, act_dim=2)
needs_cxx = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")),
    reason="torch.compile on CPU needs a C++ compiler",
)


def make_sac(device: str = "cpu") -> SAC:
    torch.manual_seed(0)
    with torch.device(device):
        return SAC(
            SPEC,
            actor=lambda o, a: TanhGaussianActor(o, a, **actor_args("sac", hidden=(32, 32))),
            critic=lambda o, a: TwinCritic(o, a, **critic_args("twin", hidden=(32, 32))),
            tuner=lambda a: AutoAlpha(a, **tuner_args("auto")),
            **algo_args("sac"),
        ).to(device)


def make_td3(device: str = "cpu", policy_noise: float = 0.2) -> TD3:
    torch.manual_seed(0)
    with torch.device(device):
        return TD3(
            SPEC,
            actor=lambda o, a: DeterministicActor(o, a, **actor_args("td3", hidden=(32, 32))),
            critic=lambda o, a: TwinCritic(o, a, **critic_args("twin", hidden=(32, 32))),
            **algo_args("td3", policy_noise=policy_noise),
        ).to(device)


def batches(n: int, device: str = "cpu", B: int = 64) -> list[Batch]:
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        out.append(Batch(
            obs=torch.randn(B, 5, generator=g), action=torch.rand(B, 2, generator=g) * 2 - 1,
            reward=torch.randn(B, generator=g), next_obs=torch.randn(B, 5, generator=g),
            discount=torch.full((B,), 0.99), terminated=torch.zeros(B),
        ).to(device))
    return out


def run(update, data: list[Batch], seed: int = 3) -> None:
    torch.manual_seed(seed)
    for batch in data:
        update(batch)


def assert_same_parameters(a: torch.nn.Module, b: torch.nn.Module, **tol: float) -> None:
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert pa.keys() == pb.keys()
    for name in pa:
        torch.testing.assert_close(pa[name], pb[name], msg=name, **tol)


# --------------------------------------------------------------------------- optimizer
@pytest.mark.parametrize("fused", [True, False])
def test_lean_adam_step_equals_torch_adam(fused: bool) -> None:
    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(s)) for s in [(3, 4), (5,), ()]]
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    kind = {"fused": True} if fused else {"foreach": True}
    opt, ref_opt = Adam(ours, lr=1e-2, **kind), torch.optim.Adam(ref, lr=1e-2, **kind)
    for step in range(12):
        grads = [torch.randn_like(p) for p in ours]
        for p, q, g in zip(ours, ref, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        assert all(p.grad is None for p in ours)
        if step == 5:  # a checkpoint round trip mid-way continues identically
            state = copy.deepcopy(opt.state_dict())
            opt = Adam(ours, lr=1e-2, **kind)
            opt.load_state_dict(state)
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert opt._lean is not None or not fused  # the fused path really took the lean step


def test_a_split_adam_steps_each_slice_as_a_lone_tensor() -> None:
    """``Adam.split(S)``: slice s of every ``[S, ...]`` parameter moves exactly as a lone
    ``torch.optim.Adam`` (fused) moves that tensor, first step included, moments and step count
    too; unsplit, the fused kernel's vector width meets the stacked tensor's end instead, and
    some slice rounds differently within a few hundred steps (checked, so this test can
    fail)."""
    torch.manual_seed(0)
    shapes, S = [(2, 1, 2), (3,), (), (2, 33)], 3  # tails shorter than any vector width
    lone = [[torch.nn.Parameter(torch.randn(shape)) for shape in shapes] for _ in range(S)]
    stacked = [torch.nn.Parameter(torch.stack([lone[s][i].detach() for s in range(S)]))
               for i in range(len(shapes))]
    whole = [torch.nn.Parameter(p.detach().clone()) for p in stacked]
    opts = [torch.optim.Adam(ps, lr=1e-3, fused=True) for ps in lone]
    split, unsplit = Adam(stacked, lr=1e-3, fused=True), Adam(whole, lr=1e-3, fused=True)
    split.split(S)
    differed = False
    for _ in range(300):
        for i, (p, q) in enumerate(zip(stacked, whole)):
            g = torch.randn_like(p) * 10.0 ** torch.randint(-6, 1, ()).item()
            p.grad, q.grad = g.clone(), g.clone()
            for s in range(S):
                lone[s][i].grad = g[s].clone()
        split.step()
        unsplit.step()
        for opt in opts:
            opt.step()
        for i, p in enumerate(stacked):
            for s in range(S):
                assert torch.equal(p[s], lone[s][i])
                moments = opts[s].state[lone[s][i]]
                assert torch.equal(split.state[p]["exp_avg_sq"][s], moments["exp_avg_sq"])
                assert torch.equal(split.state[p]["step"], moments["step"])
        differed |= any(not torch.equal(p, q) for p, q in zip(stacked, whole))
    assert differed


def test_adam_is_fused_on_cpu() -> None:
    opt = adam([torch.nn.Parameter(torch.zeros(3))], 1e-3)
    assert isinstance(opt, Adam) and opt.param_groups[0]["fused"]
    with pytest.raises(ValueError, match="> 0"):
        adam([torch.nn.Parameter(torch.zeros(3))], 0.0)


# --------------------------------------------------------------------------- compile
@needs_cxx
@pytest.mark.parametrize("make", [make_sac, make_td3], ids=["sac", "td3"])
def test_compiled_networks_make_the_same_updates(make) -> None:
    eager, compiled = make(), make()
    compile_networks(compiled)
    data = batches(4)
    run(eager.update, data)
    run(compiled.update, data)
    assert compiled.updates == eager.updates == 4
    assert_same_parameters(eager, compiled, rtol=1e-4, atol=1e-5)
    # state_dict keys are unchanged by compilation (checkpoints stay interchangeable)
    assert eager.state_dict()["modules"].keys() == compiled.state_dict()["modules"].keys()


def test_compile_reaches_networks_inside_containers() -> None:
    # MADDPG's per-agent actors sit in AgentActors, which has no forward of its own.
    from rlzoo.algos import MADDPG
    from rlzoo.nets.centralized import AgentCritics

    spec = EnvSpec(obs_dim=4, act_dim=2, n_agents=2, state_dim=8, act_dims=(2, 2))
    algo = MADDPG(spec, actor=partial(DeterministicActor, **actor_args("td3", hidden=(8,))),
                  critic=partial(AgentCritics,
                                 **critic_args("agents", hidden=(8,))), **algo_args("maddpg"))
    compile_networks(algo)
    compiled = {name for name, m in algo.named_modules()
                if getattr(m, "_compiled_call_impl", None) is not None}
    assert compiled == {"actor.net", "target_actor.net", "critic", "target_critic"}


@needs_cxx
def test_compile_true_runs_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """compile=true trains the same run as compile=false: same steps, updates and episodes,
    and (float rounding of the generated kernels aside) the same weights and evaluation; the
    compiled path really ran (inductor wrote its kernels)."""
    args = ["algo=td3", "env=Pendulum", "total_steps=300", "algo.learning_starts=200",
            "eval.every=0", "eval.episodes=1", "algo.actor.hidden=[32,32]",
            "critic.hidden=[32,32]", "log.progress=false"]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    compiled = run_cli([*args, "compile=true"], tmp_path / "compiled")
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    plain = run_cli([*args, "compile=false"], tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr[-2000:]
    kernels = [p for p in (tmp_path / "inductor").rglob("*") if p.suffix in (".py", ".so")]
    assert kernels, "compile=true wrote no inductor kernels: the compiled path did not run"
    ours, theirs = (read_summary(tmp_path / name) for name in ("compiled", "plain"))
    for key in ("algo", "env", "seed", "total_steps", "updates", "episodes", "buffer_bytes"):
        assert ours[key] == theirs[key], key
    assert (ours["total_steps"], ours["updates"]) == (300, 100)  # 1 update per step after 200
    assert ours["final_eval_return"] == pytest.approx(theirs["final_eval_return"], rel=1e-3)
    weights = [load_checkpoint(list_checkpoints(tmp_path / name / "checkpoints")[-1])["algo"]
               ["modules"] for name in ("compiled", "plain")]
    assert weights[0].keys() == weights[1].keys()  # checkpoints stay interchangeable
    for key in weights[0]:
        torch.testing.assert_close(weights[0][key], weights[1][key], rtol=1e-3, atol=1e-4,
                                   msg=key)


# --------------------------------------------------------------------------- CUDA graphs
def test_cudagraphs_on_cpu_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "env=Pendulum", "device=cpu", "cudagraphs=true"], tmp_path)
    assert_user_error(proc, "cudagraphs=true needs a CUDA device")


def test_accel_flags_must_be_switches(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "env=Pendulum", "compile=maybe"], tmp_path)
    assert_user_error(proc, "compile is a switch, auto, true or false, not 'maybe'")


class HostSideAlgo(SAC):
    """An algorithm that does not declare itself capturable (a user's, say)."""

    graph_safe = False


def test_cudagraphs_true_refuses_algorithms_with_host_side_state() -> None:
    cuda = torch.device("cuda")  # only the check runs; nothing is put on the device
    with pytest.raises(UserError, match="not supported for algo=mine: its class does not "
                                        "declare graph_safe = True"):
        check_accel(False, True, cuda, HostSideAlgo, "mine")
    for algo in (SAC, HASAC):
        check_accel(False, True, cuda, algo, "x")  # accepted
    check_accel(True, False, torch.device("cpu"), SAC, "sac")  # compile on CPU is accepted
    check_accel("auto", "auto", torch.device("cpu"), HostSideAlgo, "mine")  # auto: never refused


def test_auto_captures_on_cuda_and_changes_nothing_on_cpu() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_accel("auto", "auto", cpu, SAC, "sac") == Acceleration(False, False)
    assert resolve_accel("auto", "auto", cpu, HostSideAlgo, "mine") == Acceleration(False, False)
    assert resolve_accel("auto", "auto", cuda, SAC, "sac") == Acceleration(False, True, True)
    off = resolve_accel("auto", "auto", cuda, HostSideAlgo, "mine")
    assert (off.compile, off.cudagraphs, off.fallback) == (False, False, False)
    assert off.notes == ("cudagraphs=auto: algo=mine runs its updates eager, not as CUDA graphs: "
                         f"{HostSideAlgo.graph_unsafe_reason}",)
    assert "\n" not in off.notes[0]
    # true and false keep their meaning; a failed capture under true stops the run
    assert resolve_accel(True, True, cuda, SAC, "sac") == Acceleration(True, True, False)
    assert resolve_accel(False, False, cuda, SAC, "sac") == Acceleration(False, False)
    assert update_fn(make_sac(), *astuple(resolve_accel("auto", "auto", cpu, SAC, "sac"))[:3]
                     ).__func__ is SAC.update  # type: ignore[attr-defined]


def test_every_algorithm_of_the_zoo_can_be_captured() -> None:
    from rlzoo.algos import COMA, DSACT, MADDPG, TD3, FlashSAC, SimbaV2

    assert all(cls.graph_safe for cls in (SAC, TD3, DSACT, SimbaV2, FlashSAC, MADDPG, HASAC,
                                          COMA))


def test_the_default_cpu_run_is_the_run_without_acceleration(tmp_path: Path) -> None:
    """compile=auto cudagraphs=auto (the defaults) on the CPU train exactly the run that
    compile=false cudagraphs=false trains: the same weights, bit for bit, and no note."""
    args = ["algo=sac", "env=Pendulum", "device=cpu", "total_steps=300",
            "algo.learning_starts=200", "eval.every=0", "eval.episodes=1",
            "algo.actor.hidden=[16]", "critic.hidden=[16]", "log.progress=false"]
    auto = run_cli(args, tmp_path / "auto")
    assert auto.returncode == 0, auto.stderr[-2000:]
    off = run_cli([*args, "compile=false", "cudagraphs=false"], tmp_path / "off")
    assert off.returncode == 0, off.stderr[-2000:]
    assert "cudagraphs" not in auto.stdout + auto.stderr
    assert read_summary(tmp_path / "auto")["updates"] == 100
    weights = [load_checkpoint(list_checkpoints(tmp_path / name / "checkpoints")[-1])["algo"]
               ["modules"] for name in ("auto", "off")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_update_phases_follow_the_delays() -> None:
    td3 = make_td3()
    phases = []
    for batch in batches(4):
        phases.append(td3.update_phase())
        metrics = td3.update(batch)
        assert ("loss/actor" in metrics) == phases[-1]  # the phase predicted the branch
    assert phases == [False, True, False, True]
    sac = make_sac()
    assert sac.update_phase() == (True, True)


def test_make_capturable_sets_every_group() -> None:
    algo = make_sac()
    make_capturable(algo)
    assert all(g["capturable"] for o in algo.optimizers.values() for g in o.param_groups)


@pytest.mark.cuda
def test_graphed_updates_equal_eager_updates_on_cuda() -> None:
    # TD3 without target smoothing noise is deterministic, so replays must match eager exactly
    # (up to float reassociation); both phases (critic only, critic + actor) get a graph.
    eager, graphed = make_td3("cuda", policy_noise=0.0), make_td3("cuda", policy_noise=0.0)
    make_capturable(eager)
    make_capturable(graphed)
    update = GraphedUpdate(graphed)
    data = batches(12, "cuda")  # 3 eager updates per phase, then captures and replays
    run(eager.update, data)
    metrics = [update(batch)["loss/critic"].clone() for batch in data]
    torch.cuda.synchronize()
    assert graphed.updates == eager.updates == len(data)
    assert set(update.graphs) == {False, True}  # critic only; critic + actor + targets
    assert len({round(float(m), 6) for m in metrics}) == len(data)  # every replay really ran
    assert_same_parameters(eager, graphed, rtol=1e-4, atol=1e-5)


@pytest.mark.cuda
def test_graphed_sac_learns_like_eager_on_cuda() -> None:
    algo = make_sac("cuda")
    make_capturable(algo)
    update = GraphedUpdate(algo)
    # detached: a clone with gradient tracking would hold each weight's AccumulateGrad node,
    # made on the legacy default stream, into the capture (GraphedUpdate's docstring)
    before = {k: v.detach().clone() for k, v in algo.named_parameters()}
    for batch in batches(10, "cuda"):
        metrics = update(batch)
    torch.cuda.synchronize()
    assert algo.updates == 10 and set(update.graphs) == {(True, True)}
    assert all(torch.isfinite(v).all() for v in metrics.values())
    assert all(not torch.equal(before[k], v) for k, v in algo.named_parameters())


@pytest.mark.cuda
@pytest.mark.parametrize("fallback", [False, True])
def test_a_weight_graph_held_outside_the_update_is_one_clear_line(fallback: bool) -> None:
    """The cause of the old failure (cudaErrorStreamCaptureImplicit): autograd nodes of the
    weights made on the legacy default stream and held by the caller. Capture either succeeds
    (a torch that redirects such nodes) or fails with a line saying what to detach; under
    cudagraphs=auto (fallback) the run continues eager and makes every update."""
    algo = make_sac("cuda")
    make_capturable(algo)
    update = GraphedUpdate(algo, fallback=fallback)
    held = [p.clone() for p in algo.parameters()]  # gradient tracked, on the default stream
    data = batches(8, "cuda")
    try:
        for batch in data:
            update(batch)
    except CaptureFailed as err:
        assert not fallback and "detach it" in str(err)
        return
    torch.cuda.synchronize()
    assert algo.updates == len(data) and len(held) > 0
    if update.failure is not None:
        assert fallback and "detach it" in update.failure
