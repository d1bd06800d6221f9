"""From a composed config to objects, read once: the settings (`settings`) and the warnings about
them (`advice`), the factories (`build`: env and algorithm; `storage`), the normalizers attached
(`normalization`), the `_target_`s checked (`targets`, `trust`), the CPU threads (`threads`) and
old run dirs' configs brought up to date (`added_keys`)."""
