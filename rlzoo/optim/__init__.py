"""Optimizers: Adam and MemberAdam (`adam`) and the entropy temperature tuners beside them
(`entropy`: FixedAlpha, AutoAlpha)."""
