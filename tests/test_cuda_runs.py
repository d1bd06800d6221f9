"""CUDA runs through the CLI (marked ``cuda``: skipped without a GPU), and the CPU halves of what
they check, which run everywhere.

On CUDA (the defaults: ``device=auto``, ``cudagraphs=auto``, so the updates are captured):
a seed group equals its single runs, a run resumes bit-exact on the same GPU, a CUDA run's
checkpoint resumes on a CPU-only machine and a CPU run's on the GPU, and a policy exported from a
CUDA run (observation normalizer inside) loads and acts on a CPU-only machine. A CPU-only machine
is a child process with ``CUDA_VISIBLE_DEVICES=""``.

On the CPU: optimizer state saved by a capturable run (as every CUDA run's is now) loads into a
plain run and the reverse, each keeping its own ``capturable`` choice and rate tensors.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TINY, cli_env, read_summary

from rlzoo.run.accel import make_capturable
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from tests.capture import batches, build, state_tensors

REPO = Path(__file__).resolve().parents[1]
SMALL = ["algo=sac", "env=Pendulum", "eval.every=0", "eval.episodes=1", "checkpoint.every=0",
         "log.every=50", "log.progress=false", "algo.learning_starts=40", "algo.batch_size=16",
         "algo.buffer_size=1000", *TINY]


def cli(args: list[str], run_dir: Path | None = None, gpu: bool = True
        ) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter (never forked from a process that may hold CUDA); with
    ``gpu=False`` on a machine without one (``CUDA_VISIBLE_DEVICES=""``)."""
    env = cli_env()
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [sys.executable, "-m", "rlzoo.train", *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def final_state(run_dir: Path) -> dict[str, Any]:
    return load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])


def assert_same(a: Any, b: Any, path: str = "") -> None:
    """Equal bit for bit (tensors, arrays, containers), the wall-time counter aside."""
    if path.endswith("wall_time"):
        return
    if isinstance(a, torch.Tensor):
        assert torch.equal(a.cpu(), b.cpu()), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif hasattr(a, "shape") and hasattr(a, "dtype"):  # numpy
        assert a.dtype == b.dtype and (a == b).all(), path
    else:
        assert a == b, path


# --------------------------------------------------------------------------- CPU halves
@pytest.mark.parametrize("direction", ["capturable into plain", "plain into capturable"])
def test_optimizer_state_crosses_between_capturable_and_plain_runs(direction: str) -> None:
    """A checkpoint of a capturable SimbaV2 (a CUDA run's kind) resumes in a plain one (a CPU
    run's) and the reverse: the loading run keeps its own ``capturable`` and its rate tensors
    (a captured graph reads them by address), its clock takes the checkpoint's update count,
    and it continues as the saving run would have, to float rounding."""
    saver_capturable = direction == "capturable into plain"
    saver, loader = build("simbav2"), build("simbav2")
    if saver_capturable:
        make_capturable(saver)
    else:
        make_capturable(loader)
    items = batches("simbav2", saver, 8)
    for item in items[:4]:
        saver.update(item)
    buffer = io.BytesIO()
    torch.save(saver.state_dict(), buffer)
    buffer.seek(0)
    rates = {name: opt.param_groups[0]["lr"] for name, opt in loader.optimizers.items()}
    loader.load_state_dict(torch.load(buffer, weights_only=True))
    for name, opt in loader.optimizers.items():
        assert opt.param_groups[0]["capturable"] is not saver_capturable, name
        assert opt.param_groups[0]["lr"] is rates[name], name
    assert int(loader.lr_schedule.clock) == loader.updates == 4
    for i, item in enumerate(items[4:]):
        torch.manual_seed(i)
        saver.update(item)
        torch.manual_seed(i)
        loader.update(item)
    ours, theirs = state_tensors(saver), state_tensors(loader)
    for key in ours:
        torch.testing.assert_close(ours[key].double(), theirs[key].double(), rtol=1e-5,
                                   atol=1e-6, msg=key)


def test_a_state_dict_holds_each_rate_as_a_value_not_the_live_tensor() -> None:
    """Saving copies the rates' values: a later update does not change a saved state."""
    algo = build("flashsac")
    for item in batches("flashsac", algo, 2):
        algo.update(item)
    saved = algo.state_dict()
    before = float(saved["optimizers"]["critic"]["param_groups"][0]["lr"])
    for item in batches("flashsac", algo, 3, seed=9):
        algo.update(item)
    assert float(saved["optimizers"]["critic"]["param_groups"][0]["lr"]) == before


# --------------------------------------------------------------------------- CUDA runs
@pytest.mark.cuda
def test_a_cuda_run_resumes_bit_exact_on_the_same_gpu(tmp_path: Path) -> None:
    cli([*SMALL, "total_steps=260"], tmp_path / "straight")
    cli([*SMALL, "total_steps=137"], tmp_path / "split")
    cli([f"resume={tmp_path / 'split'}", "total_steps=260"])
    straight, split = final_state(tmp_path / "straight"), final_state(tmp_path / "split")
    for key in ("algo", "members", "counters", "rng"):
        assert_same(straight[key], split[key], key)
    assert read_summary(tmp_path / "split")["updates"] == read_summary(
        tmp_path / "straight")["updates"] == 220
    assert not read_summary(tmp_path / "straight").get("warnings")  # captured, no note


@pytest.mark.cuda
def test_a_seed_group_on_cuda_equals_its_single_runs(tmp_path: Path) -> None:
    cli([*SMALL, "total_steps=200", "seeds=2"], tmp_path / "g-s0")
    group = final_state(tmp_path / "g-s0")["algo"]["modules"]
    for k in (0, 1):
        cli([*SMALL, "total_steps=200", f"seed={k}"], tmp_path / f"single-s{k}")
        single = final_state(tmp_path / f"single-s{k}")["algo"]["modules"]
        for key, value in single.items():
            # the group's batched kernels may round differently from one seed's on a GPU
            torch.testing.assert_close(group[key][k], value[0], rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.cuda
@pytest.mark.parametrize("first", ["cuda", "cpu"])
def test_a_checkpoint_resumes_across_cuda_and_cpu(tmp_path: Path, first: str) -> None:
    """device=auto: trained to 137 steps on one kind of machine, resumed to 260 on the other
    (a GPU run's checkpoint on a CPU-only machine, and the reverse, captured there)."""
    run_dir = tmp_path / "run"
    cli([*SMALL, "total_steps=137"], run_dir, gpu=first == "cuda")
    proc = cli([f"resume={run_dir}", "total_steps=260"], gpu=first != "cuda")
    summary = read_summary(run_dir)
    assert (summary["total_steps"], summary["updates"]) == (260, 220), proc.stdout[-1000:]
    state = final_state(run_dir)
    assert all(torch.isfinite(v).all() for v in state["algo"]["modules"].values())
    groups = [g for opt in state["algo"]["optimizers"].values() for g in opt["param_groups"]]
    assert all(g["capturable"] is (first == "cpu") for g in groups)  # the resuming run's


CHILD = """
    import sys
    import torch
    assert not torch.cuda.is_available()
    from rlzoo.policy.policy import load_policy
    policy = load_policy(sys.argv[1])
    obs = torch.load("obs.pt", weights_only=True)
    torch.save(policy(obs), "rlzoo.pt")
    exported = torch.export.load("policy.pt2").module()
    torch.save(exported(obs), "exported.pt")
    print("acted on", policy.device)
"""


@pytest.mark.cuda
def test_a_policy_exported_from_a_cuda_run_acts_on_a_cpu_only_machine(tmp_path: Path) -> None:
    from rlzoo.policy.policy import load_policy

    run_dir = tmp_path / "run"
    cli([*SMALL, "total_steps=200", "normalize.obs=true"], run_dir)
    policy = load_policy(run_dir, device="cuda")
    assert policy.algo.obs_normalizer is not None
    obs = torch.randn(5, 3) * 2
    want = policy(obs.cuda()).cpu()
    load_policy(run_dir).export(tmp_path / "policy.pt2")  # exported on the CPU, as a user would
    torch.save(obs, tmp_path / "obs.pt")
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    env = {**cli_env(), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "child.py", str(run_dir)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "acted on cpu" in proc.stdout
    for name in ("rlzoo.pt", "exported.pt"):
        got = torch.load(tmp_path / name, weights_only=True)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)
