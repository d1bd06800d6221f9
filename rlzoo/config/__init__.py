"""From a composed config to objects, read once: the settings (`settings`), the factories
(`build`), the normalizers attached (`normalization`), the `_target_`s checked (`targets`, `trust`)
and old run dirs' configs brought up to date (`added_keys`)."""
