"""Command line: ``python -m rlzoo.train algo=sac env=Humanoid [key=value ...]``.

Every key is documented in ``rlzoo/conf/config.yaml`` and the group files beside it.
``python -m rlzoo.train resume=RUN_DIR [total_steps=N]`` continues a run in place from its newest
valid checkpoint, with the config it was started with.

Exit status: 0 when the run finished or was stopped by SIGTERM/SIGINT after writing a checkpoint;
2 for a user mistake (one ``rlzoo: error:`` line); 3 when training produced NaN/inf.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import UserError, exit_with
from rlzoo.trainer import (
    Interrupted,
    NonFiniteError,
    Trainer,
    check_env_config,
    read_run_config,
)

# What may change when a run is resumed: the budget and how it is shown. Anything else would make
# the continuation a different run.
RESUME_OPTIONS = ("total_steps", "log.progress")


def run(cfg: DictConfig, run_dir: Path, resume: bool = False) -> dict[str, Any]:
    """Train (or continue) one run and report the outcome on stdout/stderr."""
    try:
        check_env_config(cfg)
        summary = Trainer(cfg, run_dir).train(resume=resume)
    except UserError as err:
        exit_with(str(err))
    except NonFiniteError as err:
        exit_with(str(err), status=3)
    except Interrupted as stop:
        print(
            f"rlzoo: stopped by {stop} at step {stop.step}; checkpoint {stop.path}; continue with: "
            f"python -m rlzoo.train resume={stop.run_dir}",
            file=sys.stderr, flush=True,
        )
        sys.exit(0)
    print(
        f"rlzoo: {summary['algo']} on {summary['env']}: final eval return "
        f"{summary['final_eval_return']:.2f} ± {summary['final_eval_return_std']:.2f} after "
        f"{summary['total_steps']} steps ({summary['steps_per_sec']:.1f} steps/s)"
        f"; run dir {run_dir}"
    )
    return summary


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def hydra_main(cfg: DictConfig) -> float:
    """Train one run into Hydra's run dir; returns the final eval return (for sweepers)."""
    if cfg.get("resume"):
        exit_with("resume=RUN_DIR cannot be part of a multirun (-m); resume one run at a time")
    summary = run(cfg, Path(HydraConfig.get().runtime.output_dir))
    return float(summary["final_eval_return"])


def resume(args: list[str]) -> None:
    """``resume=RUN_DIR [total_steps=N] [log.progress=...]``: continue a run in place."""
    run_dir = Path(next(a for a in args if a.startswith("resume=")).split("=", 1)[1]).expanduser()
    overrides = [a for a in args if not a.startswith("resume=")]
    for item in overrides:
        key = item.split("=", 1)[0]
        if "=" not in item or key not in RESUME_OPTIONS:
            exit_with(
                f"resume continues a run with its own config, so {item!r} cannot be changed; "
                f"only {', '.join(k + '=...' for k in RESUME_OPTIONS)} may be given"
            )
    try:
        cfg = OmegaConf.merge(read_run_config(run_dir), OmegaConf.from_dotlist(overrides))
    except UserError as err:
        exit_with(str(err))
    if overrides:  # a later resume continues with the new budget
        OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    run(cfg, run_dir, resume=True)  # type: ignore[arg-type]


def main() -> None:
    args = sys.argv[1:]
    if any(a.startswith("resume=") and a != "resume=null" for a in args):
        resume(args)
    else:
        hydra_main()


if __name__ == "__main__":
    main()
