"""Command line: ``python -m rlzoo.train algo=sac env=Humanoid [key=value ...]``.

Every key is documented in ``rlzoo/conf/config.yaml`` and the group files beside it.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlzoo.errors import UserError, exit_with
from rlzoo.trainer import Trainer, check_env_config


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Train one run; returns the final eval return (for Hydra sweepers)."""
    try:
        check_env_config(cfg)
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        summary = Trainer(cfg, run_dir).train()
    except UserError as err:
        exit_with(str(err))
    print(
        f"rlzoo: {summary['algo']} on {summary['env']}: final eval return "
        f"{summary['final_eval_return']:.2f} ± {summary['final_eval_return_std']:.2f} after "
        f"{summary['total_steps']} steps ({summary['steps_per_sec']:.1f} steps/s)"
        f"; run dir {run_dir}"
    )
    return float(summary["final_eval_return"])


if __name__ == "__main__":
    main()
