"""A replay buffer of one (``ReplayBuffer`` with K = 1) spoken to as one buffer, for the tests of
what a buffer stores and samples: arrays go in without the leading axis, batches come out without
it, and its counters and storage are buffer 0's (``ptr`` an int, ``obs [T, E, ...]``). Only
slicing: the storage, the writes and the sampler are ``ReplayBuffer``'s own."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay import ONE_STEP, ROW_FIELDS, ReplayBuffer
from rlzoo.buffers.sampling import Sampling

COUNTERS = ("ptr", "head", "tail", "filled", "started")
PER_BUFFER = (*ROW_FIELDS, "index", "row_count", "generators")


def _one(value: Any) -> Any:
    """``value`` with a leading axis of 1 (None stays None)."""
    if value is None:
        return None
    return value[None] if torch.is_tensor(value) else np.asarray(value)[None]


class OneBuffer:
    """``ReplayBuffer(capacity, ..., generator_seeds=(seed,))`` without its leading axis."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                 num_envs: int = 1, device: torch.device | str = "cpu", state_dim: int = 0,
                 agent_rewards: int = 0, seed: int = 0) -> None:
        self.of = ReplayBuffer(capacity, obs_shape, action_shape, num_envs, device, state_dim,
                               agent_rewards, generator_seeds=(seed,))

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.of.add(*(_one(a) for a in args), **{k: _one(v) for k, v in kwargs.items()})

    def sample(self, batch_size: int, sampling: Sampling = ONE_STEP) -> Batch:
        batch = self.of.sample(batch_size, sampling)
        return Batch(**{name: value[0] for name, value in batch.tensors().items()})

    def __len__(self) -> int:
        return int(self.of.lengths()[0])

    @property
    def generator(self) -> torch.Generator:
        return self.of.generators[0]

    @property
    def used_nbytes(self) -> int:
        return self.of.used_nbytes(0)

    def state_dict(self) -> dict[str, Any]:
        return self.of.state_dict(0)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.of.load_state_dict(state, 0)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.of, name)
        if name in COUNTERS or (name in PER_BUFFER and value is not None):
            return value[0]
        return value
