"""``env.backend=warp``: gymnasium's MuJoCo locomotion tasks on MuJoCo Warp, every env a world
of one model stepped together as tensors on the run's device (``rlzoo.envs.mujoco_warp``;
``pip install rlzoo[warp]``)."""

from __future__ import annotations

from typing import Any

import torch

from rlzoo.envs.backend import Backend
from rlzoo.envs.gym import check_env_id
from rlzoo.envs.mujoco_warp import WarpMuJoCo, check_warp_installed


class Warp(Backend):
    """``WarpMuJoCo`` worlds on the run's device; it films nothing (``render_mode`` is refused)."""

    name = "warp"
    on_run_device = True

    def check(self, env_id: str) -> None:
        check_env_id(env_id)  # its tasks are gymnasium's ids; make() names the ones it has

    def make(self, env_id: str, num_envs: int, seed: int, *, device: torch.device,
             render_mode: str | None = None, **kwargs: Any) -> WarpMuJoCo:
        try:
            check_warp_installed()
        except ImportError as err:
            raise ValueError(str(err)) from None
        if render_mode is not None:
            raise ValueError("env.backend=warp draws nothing; film with env.backend=gymnasium")
        try:
            return WarpMuJoCo(env_id, num_envs, seed, device=device, **kwargs)
        except (ValueError, TypeError) as err:
            raise ValueError(f"cannot make {env_id} on env.backend=warp: {err}") from None


BACKEND = Warp()
