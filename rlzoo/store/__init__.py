"""What outlives a process: the checked writer (`writer`), bounded readers (`bounded`, `readers`),
run dirs and their lock (`rundir`), checkpoints (`checkpoint`, `checkpoint_checks`), seed groups on
disk and their bounds (`group`), the RNG streams and `policy.pt` record (`extras`), MP4 files
(`mp4`), a loaded state checked against the live object (`state_match`), NaN and inf in a state
(`nonfinite`), and the run-dir API for tools (`for_tools`)."""
