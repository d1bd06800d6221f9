"""Every default declared once, in YAML (issue 43 item 4): the constructors and factories of
``rlzoo/nets`` and ``rlzoo/tuners`` take what they are given. A hyperparameter default in Python
would be a second copy of a number ``rlzoo/conf`` declares (``reward_g_max=5.0`` was in four
places), free to drift from it. A run dir written before a key existed is built with the value
it ran with by ``rlzoo.config.added_keys``, not by a constructor default."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

import rlzoo.nets
import rlzoo.optim.entropy
from rlzoo.algos.base import EnvSpec
from rlzoo.conf.history import SETTINGS_ADDED
from rlzoo.config.added_keys import missing_keys, with_added_keys, with_added_settings
from rlzoo.config.build import build_algorithm, read_run_config
from rlzoo.config.settings import read_settings
from scripts.config_reads import fallbacks, repeated_defaults
from tests.from_yaml import composed

OLD_RUN = Path(__file__).parent / "fixtures" / "pre_one_loop" / "sac"

# The only defaults allowed, with their one value: structure the building code passes (or an
# optional hook), never a hyperparameter a user sets in YAML.
STRUCTURAL: dict[str, tuple[Any, str]] = {
    "members": (1, "per-agent actors and temperatures: the algorithm passes its N; 1 otherwise"),
    "n_agents": (1, "one critic per agent: MADDPG passes its N; 1 otherwise"),
    "heads": (1, "outputs per member of a network (the network contract); the caller passes 2 "
                 "for an actor's mean and log std"),
    "network": (None, "an optional trunk builder: None is the MLP, net=... sets it"),
    "key": ("critic", "make_network: where the settings live, for its messages"),
    "shape": ((), "RunningMeanStd: a scalar statistic"),
    "dim": (-1, "l2_normalize: the feature axis"),
    "buffers": (True, "polyak_update: buffers (batch norm statistics) follow the weights"),
}
CHECK_DROPOUT_KEY = ("rlzoo.nets.ensemble.check_dropout", "key", "dropout")  # a message label


def callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(name, function)`` of every class's ``__init__`` and every module-level function
    defined in ``rlzoo.nets`` and ``rlzoo.optim.entropy``."""
    modules = [importlib.import_module(f"rlzoo.nets.{info.name}")
               for info in pkgutil.iter_modules(rlzoo.nets.__path__)]
    for module in [*modules, rlzoo.optim.entropy]:
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj) and "__init__" in vars(obj):
                yield f"{module.__name__}.{name}", vars(obj)["__init__"]
            elif inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj


def hyperparameter_defaults() -> tuple[list[str], set[str]]:
    bad, seen = [], set()
    for name, fn in callables():
        seen.add(name)
        for p in inspect.signature(fn).parameters.values():
            if p.default is p.empty or (name, p.name, p.default) == CHECK_DROPOUT_KEY:
                continue
            allowed = STRUCTURAL.get(p.name)
            if allowed is None or p.default != allowed[0] or type(p.default) is not type(
                    allowed[0]):
                bad.append(f"{name}({p.name}={p.default!r})")
    return bad, seen


def test_nets_and_tuners_constructors_have_no_hyperparameter_default() -> None:
    bad, seen = hyperparameter_defaults()
    assert not bad, ("a default in Python for a hyperparameter rlzoo/conf declares (declare it "
                     "once, in YAML, with a comment; old run dirs: rlzoo/conf/history.py):\n"
                     + "\n".join(bad))
    # the scan reached the actors, critics, networks, factories and tuners
    assert {"rlzoo.nets.actors.TanhGaussianActor", "rlzoo.nets.actors.DeterministicActor",
            "rlzoo.nets.critics.EnsembleCritic", "rlzoo.nets.centralized.AgentActors",
            "rlzoo.nets.ensemble.EnsembleMLP", "rlzoo.nets.ensemble.make_network",
            "rlzoo.nets.hyperspherical.HyperLERPBlock", "rlzoo.nets.unit_norm.UnitNormMLP",
            "rlzoo.nets.normalizers.RewardScaler", "rlzoo.optim.entropy.AutoAlpha"} <= seen


def test_an_old_run_dir_is_built_with_the_values_it_ran_with() -> None:
    cfg = read_run_config(OLD_RUN)  # written before these keys existed
    assert missing_keys(cfg.algo.actor, "algo.actor") == {"layer_norm": False, "dropout": 0.0,
                                            "log_std_squash": "clamp", "eval_samples": 0}
    assert missing_keys(cfg.critic, "critic") == {"dropout": 0.0}
    assert missing_keys(cfg.tuner, "tuner") == {"loss_form": "log_alpha", "target_std": None,
                                       "alpha_optimizer": "adam"}
    filled = with_added_keys(cfg)
    assert "eval_samples" not in cfg.algo.actor  # the run's own config is left as it is
    for path in ("algo.actor", "critic", "tuner"):
        assert not missing_keys(OmegaConf.select(filled, path), path)
    algo = build_algorithm(cfg, EnvSpec(obs_dim=3, act_dim=1), torch.device("cpu"))
    assert (algo.actor.log_std_squash, algo.actor.eval_samples) == ("clamp", 0)
    assert (algo.tuner.loss_form, algo.tuner.alpha_optimizer) == ("log_alpha", "adam")


def test_an_added_key_takes_its_old_value_not_todays_yaml() -> None:
    """algo=stac declares eval_samples 10 and alpha_optimizer sgd today; a STAC run written
    before those keys existed ran with 0 and adam, and is built so."""
    cfg = composed("algo=stac")
    assert with_added_keys(cfg) is cfg  # a config composed today has every key
    OmegaConf.set_struct(cfg, False)
    del cfg.algo.actor["eval_samples"]
    del cfg.tuner["alpha_optimizer"]
    OmegaConf.set_struct(cfg, True)  # as Hydra composes it: the keys are added all the same
    filled = with_added_keys(cfg)
    assert (filled.algo.actor.eval_samples, filled.tuner.alpha_optimizer) == (0, "adam")


# Reads with a literal fallback that repeats a YAML default, allowed for now, and why.
# The list may shrink, never grow: each entry must still be found.
FALLBACKS_LEFT = {
    ("rlzoo/config/build.py", "kind"): "every env config of rlzoo declares env.kind, but an env "
    "config of a user's own may leave it out: a gymnasium id (single), as since the first commit",
}


def test_no_runtime_fallback_repeats_a_yaml_default() -> None:
    """``cfg.get("env_timeout_s", 60)`` was in three places beside config.yaml's ``60`` (issue 53
    item 4): a key is read from the config (or the ``Settings``) with no literal fallback; a run
    dir written before the key existed gets the value it ran with from rlzoo/conf/history.py."""
    every = repeated_defaults()
    assert set(FALLBACKS_LEFT) <= {(f.path, f.key) for f in every}, "FALLBACKS_LEFT: drop what went"
    found = [f for f in every if (f.path, f.key) not in FALLBACKS_LEFT]
    assert not found, ("a runtime fallback repeats the default rlzoo/conf declares (read the key "
                       "without one; old run dirs: rlzoo/conf/history.py SETTINGS_ADDED):\n"
                       + "\n".join(map(str, found)))


def test_the_fallback_scan_finds_each_form(tmp_path: Path) -> None:
    """The scan is the test above's eyes: each form of fallback it looks for, written once."""
    package = tmp_path / "rlzoo"
    package.mkdir()
    (package / "bad.py").write_text(
        'def f(cfg, s):\n'
        '    a = cfg.get("env_timeout_s", 60.0)\n'  # config.yaml: 60 (an int): the same number
        '    b = getattr(s, "seed_kernels", "exact")\n'
        '    c = OmegaConf.select(cfg, "log.wandb", default=False)\n'
        '    d = read(cfg, "env_workers") if "env_workers" in cfg else 0\n'
        '    e = cfg.get("device", "cpu")\n'  # config.yaml: auto: not a repeat
        '    g = cfg.get("not_a_key", 1)\n'  # declared nowhere
        '    return a, b, c, d, e, g\n')
    found = {(f.line, f.key, f.repeats) for f in fallbacks(package)}
    assert found == {(2, "env_timeout_s", True), (3, "seed_kernels", True),
                     (4, "wandb", True), (5, "env_workers", True), (6, "device", False)}


def test_an_old_run_dir_is_read_with_the_settings_it_ran_with() -> None:
    """The root keys added after tests/fixtures/pre_one_loop was written (seeds, env_workers,
    normalize, ...) are filled where a run dir's config is read, with what that run did."""
    cfg = read_run_config(OLD_RUN)
    assert {key: OmegaConf.select(cfg, key) for key in ("seeds", "env_workers", "env_timeout_s",
            "seed_kernels", "eval.video_every", "log.wandb", "normalize.obs")} == {
        "seeds": 1, "env_workers": 0, "env_timeout_s": 60, "seed_kernels": "exact",
        "eval.video_every": 0, "log.wandb": False, "normalize.obs": False}
    s = read_settings(cfg)
    assert (s.seeds, s.env_workers, s.env_timeout_s, s.normalize.reward) == (1, 0, 60.0, False)
    assert (s.progress_every_s, s.torch_threads, s.compile) == (300.0, 0, False)  # its own
    today = composed()
    assert with_added_settings(today) is today  # a config composed today has every key
    for key in SETTINGS_ADDED:  # and each is declared in rlzoo/conf
        assert OmegaConf.select(today, key, default="absent") != "absent", key
