"""rlzoo: actor-critic algorithms for single- and multi-agent continuous control.

``rlzoo.train(*overrides, run_dir=None, on_eval=None, on_checkpoint=None) -> Run`` trains a run
from Python as ``python -m rlzoo.train`` does (see docs/api.md);
``rlzoo.resume(RUN_DIR, "total_steps=N", trust=()) -> Run`` continues one in place, as
``python -m rlzoo.train resume=RUN_DIR`` does.
``rlzoo.load_policy(RUN_DIR, device="cpu", deterministic=True, trust=()) -> Policy`` loads a run's
``policy.pt`` as an ``nn.Module`` acting in the env's units (``rlzoo/policy/policy.py``). Names are
imported lazily, so ``import rlzoo`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlzoo.config.threads import strict_blas

strict_blas()  # before torch's first matrix product: equal numbers on any thread count


def __getattr__(name: str) -> Any:
    if name == "train":  # the module rlzoo/train.py, which is callable as the function
        return importlib.import_module("rlzoo.train")
    if name == "resume":
        return importlib.import_module("rlzoo.launch.api").resume_run
    if name == "load_policy":
        return importlib.import_module("rlzoo.policy.policy").load_policy
    raise AttributeError(f"module 'rlzoo' has no attribute {name!r}")
