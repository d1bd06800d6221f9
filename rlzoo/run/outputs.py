"""What a run writes for its readers, per seed: the update's scalars (TensorBoard), ``policy.pt``
(the weights ``rlzoo.load_policy`` and ``rlzoo.evaluate`` read), ``summary.json``, and the
HPARAMS record; and which of them a crash left behind the checkpoint."""

from __future__ import annotations

import json
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.base import Algorithm
from rlzoo.config.settings import Settings
from rlzoo.run.member import Member
from rlzoo.store.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rlzoo.store.extras import POLICY_FILE, policy_record, summary_step
from rlzoo.store.rundir import write_atomic


def log_scalars(members: list[Member], metrics: dict[str, Any], perf: dict[str, float],
                step: int) -> None:
    """The update's metrics (tensors ``[K]``: seed k's go to member k; one transfer to the host)
    and ``perf`` (the same for every member) at ``step``."""
    names = [n for n, v in metrics.items() if torch.is_tensor(v)]
    values = torch.stack([metrics[n].float() for n in names], 1).cpu().tolist() \
        if names else [[] for _ in members]
    for member, row in zip(members, values):
        assert member.logger is not None
        member.logger.scalars({**dict(zip(names, row)), **perf}, step)


def write_policies(members: list[Member], everyone: list[Member], algo: Algorithm,
                   spec: dict[str, Any]) -> None:
    """``policy.pt`` of ``members`` (of ``everyone``, the run's members in seed order) from the
    weights now: each seed's slice of the weights, its config and its step."""
    if not members:
        return
    record = policy_record(algo, {}, spec, 0)  # the weights, copied to the host once
    for k, m in enumerate(everyone):
        if m in members:
            config = OmegaConf.to_container(m.cfg, resolve=True)
            save_checkpoint(m.run_dir / POLICY_FILE, {
                **record, "step": int(m.step), "config": config,
                "weights": algo.seed_axis.weights(record["weights"], k)})


def outputs_behind(members: list[Member]) -> tuple[list[Member], list[Member]]:
    """After a restore: the members whose ``policy.pt`` is not of their checkpointed step (a
    crash after the checkpoint's rename and before theirs), and those whose ``summary.json`` is
    not at their step (a crash while the summaries were written)."""
    policies, summaries = [], []
    for m in members:
        path = m.run_dir / POLICY_FILE
        try:
            step = load_checkpoint(path).get("step") if path.is_file() else None
        except CheckpointError:
            step = None
        if step != m.step:
            policies.append(m)
        if summary_step(m.run_dir) != m.step:
            summaries.append(m)
    return policies, summaries


def drop_stale_summaries(members: list[Member]) -> None:
    """Remove each member's ``summary.json`` of an earlier leg (at a step before the member's):
    once a resumed run has checkpointed beyond it, it no longer says how the run ended, and an
    error before the new one is written must not leave it claiming a finished run."""
    for m in members:
        step = summary_step(m.run_dir)
        if step is not None and step < m.step:
            (m.run_dir / "summary.json").unlink(missing_ok=True)


def hparams(cfg: DictConfig) -> dict[str, Any]:
    """``cfg`` flattened to ``{dotted.key: value}`` (lists as strings, private keys left out),
    for TensorBoard's HPARAMS."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if not str(k).startswith("_"):
                    walk(v, f"{prefix}{k}.")
        elif isinstance(node, (int, float, str, bool)):
            flat[prefix[:-1]] = node
        elif isinstance(node, list):
            flat[prefix[:-1]] = str(node)

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return flat


def summary_record(m: Member, members: list[Member], s: Settings, wall_time: float,
                   updates: int, stopped_early: bool, warnings: list[str],
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What ``summary.json`` of member ``m`` (of ``members``) holds: its final evaluation,
    steps, episodes and speed; a seed group's members also name the group's seeds.

    ``steps_per_sec`` is the learning phase's env steps/s in this process (the random warm-up,
    often 20-50x faster, is ``warmup_steps_per_sec``; ``rlzoo.run.progress``), or the whole
    run's ``total_steps / wall_time_s`` when this process did not learn (``learning_steps_per_sec``
    null)."""
    mean, std = m.last_eval if m.last_eval else (float("nan"), float("nan"))
    logger = members[0].logger  # the one the loop advances: the group's clock
    speeds = logger.speeds() if logger is not None else {
        "learning_steps_per_sec": None, "warmup_steps_per_sec": None}
    overall = m.step / wall_time if wall_time > 0 else 0.0
    summary: dict[str, Any] = {
        "algo": s.algo_name,
        "env": s.env_name,
        "seed": m.seed,
        "total_steps": m.step,
        "final_eval_return": mean,
        "final_eval_return_std": std,
        "wall_time_s": wall_time,
        "steps_per_sec": speeds["learning_steps_per_sec"] or overall,
        **speeds,
        # its replay buffer's allocation (its share of the seed axis's storage), and the part
        # of it that holds transitions
        "buffer_bytes": {"capacity": m.storage.nbytes // len(members),
                         "used": m.storage.used_nbytes(m.index)},
        "updates": updates,
        "episodes": m.episodes,
    }
    if m.last_eval_agents is not None:
        summary["final_eval_agent_returns"] = [float(r) for r in m.last_eval_agents]
    if stopped_early:
        summary["stopped_early"] = True  # a callback stopped the run before total_steps
    summary["group_seeds"] = [member.seed for member in members]  # [seed] for a single run
    summary["warnings"] = list(warnings)
    summary.update(extra or {})  # the loop's: torch_threads (rlzoo.config.threads)
    return summary


def write_summary(m: Member, summary: dict[str, Any]) -> None:
    """Write member ``m``'s ``summary.json`` (:func:`summary_record`), the last file a finished
    run writes: once it is there, the run ended well."""
    write_atomic(m.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
