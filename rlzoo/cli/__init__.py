"""Before Hydra runs: the command line checked (`check`), its one-line messages (`messages`) and
Hydra's config groups listed for them (`groups`)."""
