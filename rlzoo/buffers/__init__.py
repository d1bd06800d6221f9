"""Replay storage and the Batch dataclass."""

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay import ReplayBuffer

__all__ = ["Batch", "ReplayBuffer"]
