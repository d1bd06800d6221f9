"""What a run will cost on a CPU, said in one line at the start: its expected time per env step
against SAC's when it is far above (SimbaV2's and FlashSAC's defaults cost about 30x SAC's per
step on a CPU: about 3.5 days for Hopper's 1M steps; docs/performance.md, "SimbaV2's cost per
step"), and, for any other run, its expected learning time when that is over
:data:`LONG_RUN_S` (SAC's 1M Humanoid steps: about 5 h by the model, 3.2 h measured on 2 quiet
cores; the progress lines give the measured time left once learning starts).

The model: an update costs ``OVERHEAD_UNITS`` plus its parameters (millions, target networks
included) times its batch size, each unit ``CPU_MS_PER_UNIT`` ms; an env step costs ``utd``
updates. Calibrated on the 2-core CPU of docs/performance.md (SAC on Hopper ~100 env steps/s
learning, SimbaV2 ~30x SAC per update, 3.3 steps/s in a real run); FlashSAC's batch norms and
doubled critic batches make it about 2x dearer than the model says. On a GPU the arithmetic is
cheap and nothing is said.
"""

from __future__ import annotations

import torch

from rlzoo.run.progress import duration

CPU_MS_PER_UNIT = 0.0635  # ms per (million parameters x batch row) of an update on a CPU core
OVERHEAD_UNITS = 68.0  # an update's fixed cost (launches, Python), in the same units
SAC_HIDDEN = 256  # SAC's defaults: 256x256 MLPs, a twin critic and its target, batch 256
WARN_ABOVE = 8.0  # x SAC per env step from which the line is said
SHORT_RUN_S = 900.0  # the shorter budget the line suggests: about 15 minutes of learning
LONG_RUN_S = 3600.0  # a run of SAC's cost is told its expected time from an hour of learning


def sac_parameters(obs_dim: int, act_dim: int) -> int:
    """Parameters of ``algo=sac``'s defaults for these dims: a tanh-Gaussian actor, a twin
    critic and its target, the temperature."""
    h = SAC_HIDDEN
    actor = (obs_dim + 1) * h + (h + 1) * h + (h + 1) * 2 * act_dim
    critic = (obs_dim + act_dim + 1) * h + (h + 1) * h + (h + 1)
    return actor + 4 * critic + 1


def ms_per_step(parameters: int, batch_size: int, utd: float) -> float:
    """Expected CPU milliseconds of the updates of one env step."""
    return CPU_MS_PER_UNIT * utd * (OVERHEAD_UNITS + parameters / 1e6 * batch_size)


def cost_note(algo: torch.nn.Module, device: torch.device, obs_dim: int, act_dim: int,
              batch_size: int, utd: float, total_steps: int, learning_starts: int,
              name: str) -> str | None:
    """One line on ``device`` (a CPU only) when this run's expected cost per env step is at
    least ``WARN_ABOVE`` times SAC's (with what to do), or else when its expected learning time
    to ``total_steps`` is at least ``LONG_RUN_S``; None otherwise."""
    if device.type != "cpu" or utd <= 0:
        return None
    parameters = sum(p.numel() for p in algo.parameters())
    ms = ms_per_step(parameters, batch_size, utd)
    ratio = ms / ms_per_step(sac_parameters(obs_dim, act_dim), 256, 1.0)
    rate = 1000.0 / ms
    learning = max(total_steps - learning_starts, 0)
    if ratio < WARN_ABOVE:
        if learning / rate < LONG_RUN_S:
            return None
        return (f"total_steps={total_steps}: about {duration(learning / rate)} of learning on a "
                f"CPU (~{rate:.0f} steps/s, estimated from algo={name}'s size, batch {batch_size} "
                f"and utd {utd:g} for 2 cores); the progress lines give the measured time left "
                "once learning starts")
    short = learning_starts + max(int(SHORT_RUN_S * rate) // 1000 * 1000, 1000)
    short_time = duration((short - learning_starts) / rate)
    fewer = "" if short >= total_steps else (
        f" or fewer steps (total_steps={short}: about {short_time})")
    return (
        f"algo={name} ({parameters / 1e6:.1f}M parameters, batch {batch_size}, utd {utd:g}) "
        f"costs about {ratio:.0f}x SAC per env step on a CPU: about {duration(learning / rate)}"
        f" for total_steps={total_steps} (~{rate:.1f} steps/s, estimated); use a GPU "
        f"(device=cuda){fewer}"
    )
