"""A trained policy: `Policy` and `load_policy` (`policy`), its export (`export`), `policy.pt`
read as data (`file`), a checkpoint's weights for `rlzoo.evaluate` (`weights`), evaluation
episodes (`episodes`) and the paired floors (`floors`)."""
