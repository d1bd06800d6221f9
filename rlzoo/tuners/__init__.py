"""Entropy temperature tuners: ``alpha`` (a tensor) and ``update(log_prob) -> loss``."""

from rlzoo.tuners.entropy import AutoAlpha, FixedAlpha, Tuner

__all__ = ["AutoAlpha", "FixedAlpha", "Tuner"]
