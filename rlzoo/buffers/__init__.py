"""Storage for what the loop collects: replay (off-policy) and rollouts (on-policy), the Batch a
replay sample is, and the Sampling an algorithm declares."""

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import Rollout, RolloutBuffer
from rlzoo.buffers.sampling import Sampling

__all__ = ["Batch", "ReplayBuffer", "Rollout", "RolloutBuffer", "Sampling"]
