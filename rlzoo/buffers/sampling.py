"""What an off-policy algorithm samples from replay, declared by the algorithm in one object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """How a batch is drawn from replay (``Algorithm.sampling``; the loop hands it to storage).

    Attributes:
        n_step: n, rewards summed before bootstrapping, cut at episode ends (1 = one-step).
        horizon: H, consecutive actions per sample (action chunks ``[B, H * A]`` with H-step
            returns; 1 = single actions). With ``H > 1`` the window is H steps and ``n_step`` is
            not used.
        gamma: the discount of the returns and of the bootstrap (``discount = gamma^k (1 - d)``).
    """

    n_step: int = 1
    horizon: int = 1
    gamma: float = 0.99

    def __post_init__(self) -> None:
        if self.n_step < 1 or self.horizon < 1:
            raise ValueError(f"n_step and horizon must be >= 1, got {self.n_step}, {self.horizon}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
