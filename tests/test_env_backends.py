"""Single-agent env backends as a registry (issue 53 item 2): rlzoo's own found by name, no
backend named in a comparison outside its own files, one line for an unknown one, and a backend
of one's own (defined here) that trains through the real trainer from a config of its own or by
the name it registers, without a file of rlzoo changed (docs/extending.md, "A new single-agent
env backend")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

import rlzoo
from rlzoo.conf.history import BACKEND_BEFORE
from rlzoo.config.build import check_env_config, make_env
from rlzoo.config.targets import check_buildable
from rlzoo.envs.backend import Backend
from rlzoo.envs.backends import BACKENDS, get_backend, register_backend
from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.errors import EnvFailed, UserError
from tests.test_env_families import family_comparisons

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rlzoo"
# the backends' own files (the registry's entries and the simulators they wrap) name themselves
OWN = (PACKAGE / "envs" / "backends", PACKAGE / "envs" / "mujoco_warp.py")
# modules that still branch on a backend's name, with how many branches: may shrink, never grow
# (the settings' env_workers check names the backends with an env object each)
NOT_YET = {"rlzoo/config/settings.py": 1}


def single_cfg(backend: Any = "gymnasium", env_id: str = "Pendulum-v1") -> Any:
    env: dict[str, Any] = {"name": "p", "kind": "single", "id": env_id, "kwargs": {}}
    if backend is not None:
        env["backend"] = backend
    return OmegaConf.create({"device": "cpu", "env": env,
                             "algo": {"_target_": "rlzoo.algos.sac.SAC"}})


# --------------------------------------------------------------------------- the registry


def test_the_registry_lists_every_backend_file_by_name() -> None:
    files = sorted(p.stem for p in (PACKAGE / "envs" / "backends").glob("*.py")
                   if p.stem != "__init__")
    assert sorted(BACKENDS) == files == ["gymnasium", "warp"]
    for name, backend in BACKENDS.items():
        assert isinstance(backend, Backend) and backend.name == name
        assert get_backend(name) is backend and get_backend(backend) is backend
    assert BACKENDS["warp"].on_run_device and not BACKENDS["gymnasium"].on_run_device
    with pytest.raises(TypeError, match="a named rlzoo.envs.backend.Backend"):
        register_backend(Backend())  # no name


def test_an_unknown_backend_is_one_line() -> None:
    for build in (lambda cfg: make_env(cfg, 1, 0), check_env_config):
        with pytest.raises(UserError, match=r"^env.backend of a single-agent env must be one of "
                                            r"gymnasium, warp, got 'wrap'; or your own: ") as err:
            build(single_cfg("wrap"))
        assert "\n" not in str(err.value)
    not_one = single_cfg({"_target_": "collections.OrderedDict"})  # builds, but is no Backend
    with pytest.raises(UserError, match="^env.backend must be a backend name or an "
                                        "rlzoo.envs.backend.Backend, got OrderedDict"):
        make_env(not_one, 1, 0)
    with pytest.raises(UserError, match="env.backend._target_=collections.OrderedDict .*a "
                                        "single-agent env backend"):
        check_buildable(not_one)  # the command line's check, before any run dir exists
    check_buildable(single_cfg(TARGET))


def test_the_cli_refuses_an_unknown_backend_in_one_line(tmp_path: Path) -> None:
    from conftest import TINY, assert_user_error, run_cli

    proc = run_cli(["algo=sac", "env=Pendulum", "env.backend=wrap", *TINY, "total_steps=10"],
                   tmp_path / "run")
    assert_user_error(proc, "env.backend of a single-agent env must be one of gymnasium, warp, "
                      "got 'wrap'")
    assert not (tmp_path / "run").exists()


def test_every_single_agent_env_config_names_its_backend() -> None:
    """The YAML is the one place a backend is chosen: a config without ``backend`` is an old
    run dir's, read as what it ran on (rlzoo.conf.history.BACKEND_BEFORE), not a default."""
    configs = [p for p in (PACKAGE / "conf" / "env").rglob("*.yaml")]
    assert len(configs) > 20
    lacking = [str(p.relative_to(REPO)) for p in configs
               if "backend" not in OmegaConf.load(p)]
    assert lacking == []
    old = make_env(single_cfg(None), 2, 0)  # a run dir written before backends existed
    assert isinstance(old, SingleAgentVecEnv) and BACKEND_BEFORE["single"] == "gymnasium"
    old.close()


def test_no_backend_is_named_in_a_comparison_outside_its_own_files() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in OWN or any(own in path.parents for own in OWN):
            continue
        hits = family_comparisons(path.read_text(), str(path.relative_to(REPO)), tuple(BACKENDS))
        if hits:
            found[str(path.relative_to(REPO))] = len(hits)
    grew = {path: n for path, n in found.items() if n > NOT_YET.get(path, 0)}
    assert not grew, ("a branch on an env backend's name (ask its rlzoo.envs.backend.Backend "
                      f"instead, rlzoo.config.build.single_backend): {grew}")


# --------------------------------------------------------------------------- a backend of one's own


class ShortEpisodes(Backend):
    """gymnasium's envs cut at ``limit`` steps; every env it makes is recorded in ``made``."""

    name = "short"
    limit = 40
    made: list[tuple[str, int, int]] = []

    def check(self, env_id: str) -> None:
        if not env_id.startswith("Pendulum"):
            raise ValueError(f"the short backend has no task {env_id!r}; it has Pendulum-v1")

    def make(self, env_id: str, num_envs: int, seed: int, **kwargs: Any) -> SingleAgentVecEnv:
        if kwargs.get("boom"):
            raise RuntimeError("no simulator licence on this host")
        ShortEpisodes.made.append((env_id, num_envs, seed))
        return SingleAgentVecEnv(env_id, num_envs, seed, max_episode_steps=self.limit,
                                 **kwargs)


TARGET = {"_target_": f"{ShortEpisodes.__module__}.ShortEpisodes"}


def test_a_backend_of_ones_own_is_built_by_target_or_by_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ShortEpisodes, "made", [])
    env = make_env(single_cfg(TARGET), 3, 7)
    assert isinstance(env, SingleAgentVecEnv) and env.max_episode_steps == 40
    assert ShortEpisodes.made == [("Pendulum-v1", 3, 7)]
    env.close()
    with pytest.raises(UserError, match="^env.backend of a single-agent env must be one of "):
        make_env(single_cfg("short"), 1, 0)
    monkeypatch.setitem(BACKENDS, "short", ShortEpisodes())
    make_env(single_cfg("short"), 1, 0).close()  # registered by name
    assert ShortEpisodes.made[-1] == ("Pendulum-v1", 1, 0)
    with pytest.raises(UserError, match=r"^the short backend has no task 'Hopper-v5'; it has "
                                        r"Pendulum-v1$"):
        check_env_config(single_cfg("short", "Hopper-v5"))
    boom = single_cfg("short")
    boom.env.kwargs = {"boom": True}
    with pytest.raises(EnvFailed, match=r"^cannot make env=p: its constructor raised "
                                        "RuntimeError: no simulator licence on this host"):
        make_env(boom, 1, 0)


def test_a_backend_of_ones_own_trains_from_its_env_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m rlzoo.train``'s Python twin, from a config folder of one's own: the training
    and the evaluation envs are the backend's (40-step episodes), and the run dir records it."""
    monkeypatch.setattr(ShortEpisodes, "made", [])
    (tmp_path / "conf" / "env").mkdir(parents=True)
    (tmp_path / "conf" / "env" / "short.yaml").write_text(
        "name: short-pendulum\n"
        "kind: single\n"
        "id: Pendulum-v1\n"
        f"backend: {{_target_: {TARGET['_target_']}}}\n"
        "kwargs: {}\n"
        "total_steps: 1000\n")
    rlzoo.train(f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "env=short", "algo=sac",
                "algo.actor.hidden=[16]", "critic.hidden=[16]", "algo.learning_starts=50",
                "algo.batch_size=16", "num_envs=2", "total_steps=120", "eval.every=0",
                "eval.episodes=2", "log.progress=false", run_dir=tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env"] == "short-pendulum" and summary["total_steps"] == 120
    # the probe env, the training envs (seed 0, 2 envs), the evaluation envs (seed 10000, 2)
    assert ("Pendulum-v1", 2, 0) in ShortEpisodes.made
    assert ("Pendulum-v1", 2, 10_000) in ShortEpisodes.made
    # 120 steps over 2 envs: 60 steps each, episodes of 40: one finished episode per env
    assert summary["episodes"] == 2
    saved = OmegaConf.load(tmp_path / "run" / ".hydra" / "config.yaml")
    assert saved.env.backend == TARGET
