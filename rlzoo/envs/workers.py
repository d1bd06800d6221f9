"""A run's envs stepped in parallel processes (``env_workers=W``): the same envs, the same seeds,
the same numbers, W + 1 cores.

:class:`WorkerVecEnv` splits ``num_envs`` envs into ``W + 1`` contiguous slices (fewer when there
are fewer envs): the training process steps the first slice itself while ``W`` worker processes
step the others, each an ordinary in-process :class:`~rlzoo.envs.base.VecEnv` of ``n_s`` envs
seeded ``seed + start_s`` (so env ``e`` gets ``seed + e``, as in one process). A vector step's
arrays go through shared memory: actions ``[E, *act_shape]`` and observations ``[E, *obs_shape]``
float32, rewards, flags, global state and per-agent rewards as the VecEnv contract types them
(an env that returns another dtype sends those arrays by pipe instead, unchanged). One small
message each way per worker and vector step says "step" and "done"; both ends poll the pipe
without sleeping for up to ``worker_side.SPIN_S`` (yielding the core to any process that waits
for it) before they sleep on it, so a fast answer costs no wake-up by the scheduler.
:meth:`step_async` hands the workers their actions and steps the training process's own slice;
:meth:`step_wait` collects the workers' part, so several such envs (a seed group's) step at
once. A run with workers is bit-identical to the same run stepped in turn: each env runs the
same code on the same seed, only maybe in another process.

Failure: a worker whose envs cannot be made (their constructor raised: the cause, in one line,
as the same failure in this process says it), that fails a request (an env's error, e.g. an
observation of the wrong shape), dies, or answers nothing for ``timeout`` seconds raises
:class:`EnvWorkerError` (one line: which worker, what happened); the loop adds where the run
can continue from. The constructor waits until every worker has made its envs, so a worker's
failure to make them ends the run where the same failure in this process does. Workers ignore
Ctrl-C and SIGTERM (the trainer catches them and checkpoints, which needs the workers' env
states) and are killed with their parent (Linux ``PR_SET_PDEATHSIG``), at its interpreter's
exit, or when the constructor is stopped (a signal while the workers start), so none outlives
the run. They are forked with SIGTERM and SIGINT held (:func:`_signals_held`): a signal that
lands during a fork is taken by the trainer's handler once the fork is done, never inside
Python's at-fork hooks, which drop exceptions (``rlzoo.run.signals``). The workers' own side
(their loop, the shared-memory layout) is ``rlzoo.envs.worker_side``.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import multiprocessing.util  # noqa: F401 - its exit handler registered before this module's
import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlzoo.envs.base import EnvError, StepResult, VecEnv
from rlzoo.envs.worker_side import (
    FIELDS,
    MakeEnv,
    layout_offsets,
    layout_views,
    poll_ready,
    serve,
    shapes,
    step_layout,
)

__all__ = ["EnvWorkerError", "WorkerVecEnv"]

class EnvWorkerError(EnvError):
    """An env worker could not make its envs, failed a request, died or hung (one line)."""


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Within the block SIGTERM and SIGINT are only noted; at its end the handlers that were in
    place take them, in order, where the block ends (in the main thread; elsewhere Python runs
    no handler anyway). A fork inside the block runs Python's at-fork hooks (logging's among
    them), which drop any exception, with no handler that raises one (a ``LaunchStopped``
    raised there would be lost and the run would train on), and the child starts with a
    handler that raises nothing until it ignores the signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) is not None:  # None: not set from Python, cannot put back
                previous[sig] = signal.signal(sig, lambda signum, frame: noted.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in noted:
            signal.raise_signal(signum)


def _kill_all(env: weakref.ref[WorkerVecEnv]) -> None:
    """SIGKILL the workers of ``env`` still alive (at interpreter exit)."""
    live = env()
    for proc in getattr(live, "_procs", []):
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)


class WorkerVecEnv(VecEnv):
    """``num_envs`` envs, stepped by the training process and ``workers`` worker processes at
    once, behind the :class:`VecEnv` contract.

    Args:
        make: ``make(n, seed)`` builds an in-process vector env of ``n`` envs, env ``i`` seeded
            ``seed + i`` (e.g. ``lambda n, s: SingleAgentVecEnv("Hopper-v5", n, s)``).
        num_envs: E, split into ``workers + 1`` contiguous slices (at most E): the first
            stepped here, each other one by a worker process.
        seed: env ``e``'s seed is ``seed + e``, as in one process.
        workers: W >= 1 worker processes (fewer when E <= W).
        timeout: seconds a worker may take to answer one request before it counts as hung.
    """

    def __init__(self, make: MakeEnv, num_envs: int, seed: int, workers: int,
                 timeout: float = 60.0) -> None:
        if int(workers) < 1:
            raise ValueError(f"env_workers must be >= 1 to use workers, got {workers}")
        E = int(num_envs)
        S = max(1, min(int(workers) + 1, E))  # slices: this process's, then one per worker
        bounds = np.linspace(0, E, S + 1).round().astype(int)
        self._slices = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        self._local = make(self._slices[0][1], seed)  # slice 0, stepped in this process
        for name in ("obs_shape", "act_shape", "n_agents", "state_dim", "act_mask",
                     "action_low", "action_high"):
            setattr(self, name, getattr(self._local, name))
        self._start(E, seed)
        self.timeout = float(timeout)
        ctx = mp.get_context("fork")
        obs_buf = ctx.RawArray("f", int(E * np.prod(self.obs_shape)))
        act_buf = ctx.RawArray("f", int(E * np.prod(self.act_shape)))
        self._obs = np.frombuffer(obs_buf, dtype=np.float32).reshape(E, *self.obs_shape)
        self._act = np.frombuffer(act_buf, dtype=np.float32).reshape(E, *self.act_shape)
        arrays = step_layout(E, self.n_agents, self.state_dim, self._local.multi_agent)
        step_buf = ctx.RawArray("b", layout_offsets(arrays)[1])
        self._out = layout_views(step_buf, arrays)
        self._conns, self._procs = [], []
        self._waiting: Any = None  # this process's part of the step started by step_async
        # workers ignore SIGTERM, which multiprocessing's own exit handler sends its daemon
        # processes before joining them: kill them first (registered before the first fork,
        # after multiprocessing's handler, so it runs before it), or an interpreter that exits
        # without close() (an uncaught error, a signal while they start) waits for them forever
        atexit.register(_kill_all, weakref.ref(self))
        try:
            for a, b in self._slices[1:]:
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=serve, daemon=True, name=f"rlzoo-env-{a}-{b}",
                                   args=(make, b - a, int(seed) + a, child, obs_buf, act_buf, a,
                                         self.obs_shape, self.act_shape, E, step_buf, arrays))
                with _signals_held():  # a signal during the fork is taken here, after it
                    proc.start()
                    self._conns.append(parent)
                    self._procs.append(proc)
                child.close()
            for w, made in enumerate(self._recv_all()):  # each worker's envs, made (or not)
                if tuple(made) != shapes(self._local):
                    self._fail(w, f"made envs of shapes {made} (observation, action, agents, "
                               f"state), unlike this process's {shapes(self._local)}")
        except BaseException:  # a failure or a signal while they start: none is left behind
            self._stop_all()
            self._local.close()
            raise

    def __getattr__(self, name: str) -> Any:
        """Adapter attributes (``obs_mask``, ``max_episode_steps``, ``agent_ids``, ...) from
        this process's own slice of envs."""
        if name.startswith("__") or name == "_local":
            raise AttributeError(name)
        return getattr(self._local, name)

    # ------------------------------------------------------------------ the contract
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Reset every env (env ``e`` seeded ``seed + e``; see :meth:`VecEnv.reset`)."""
        self._send_all(lambda a: ("reset", None if seed is None else int(seed) + a))
        obs, state = self._local.reset(seed=seed)
        self._obs[: len(obs)] = obs
        states = [state, *self._recv_all()]
        self._seeded = True
        self._needs_reset[:] = False
        return self._obs.copy(), (np.concatenate(states) if self.state_dim else None)

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> StepResult:
        """Step every env (or those where ``active``): :meth:`step_async` then :meth:`step_wait`."""
        self.step_async(action, active)
        return self.step_wait()

    def step_async(self, action: np.ndarray, active: np.ndarray | None = None) -> None:
        """Hand ``action [E, *act_shape]`` (clipped to ``[-1, 1]`` as every backend does) to the
        workers, step this process's slice meanwhile, and return; :meth:`step_wait` collects
        the workers' part."""
        if not self._seeded:
            raise RuntimeError("call reset() before step()")
        self._act[:] = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        self._send_all(lambda a: ("step", None if active is None else
                                  np.asarray(active)[a:a + self._size(a)].copy()))
        n = self._slices[0][1]
        mine = self._local.step(self._act[:n].copy(),
                                active=None if active is None else np.asarray(active)[:n])
        self._obs[:n] = mine.obs
        self._waiting = (mine.reward, mine.terminated, mine.truncated, mine.reset_step,
                         mine.state, mine.agent_reward)

    def step_wait(self) -> StepResult:
        """The step started by :meth:`step_async`, as :meth:`VecEnv.step` returns it."""
        answers = self._recv_all()
        parts = [self._waiting, *(self._published(a, b) if answer is None else answer
                                  for answer, (a, b) in zip(answers, self._slices[1:],
                                                            strict=True))]
        self._waiting = None

        def cat(i: int) -> np.ndarray | None:
            return None if parts[0][i] is None else np.concatenate([p[i] for p in parts])

        result = StepResult(self._obs.copy(), cat(0), cat(1), cat(2), cat(3),  # type: ignore[arg-type]
                            state=cat(4), agent_reward=cat(5))
        self._needs_reset = result.terminated | result.truncated
        return result

    def get_state(self) -> dict[str, Any]:
        """Each slice's env state, in slice order (see the in-process adapter's)."""
        self._send_all(lambda a: ("get_state", None))
        mine = self._local.get_state()
        return {"slices_state": [mine, *self._recv_all()],
                "slices": [list(s) for s in self._slices],
                "seeded": self._seeded, "seed": self._seed}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s result; the saved split into slices must be this one."""
        if not isinstance(state, dict) or "slices_state" not in state:
            raise ValueError("the saved env state was taken without env_workers; resume with "
                             "the env_workers the run was started with")
        slices = [tuple(int(x) for x in s) for s in state["slices"]]
        if slices != self._slices:
            raise ValueError(f"the saved env state was split into slices {slices}, this run "
                             f"into {self._slices}: resume with the same env_workers")
        parts = state["slices_state"]
        self._send_all(lambda a: ("set_state", parts[self._index(a)]))
        self._local.set_state(parts[0])
        self._recv_all()
        self._seed, self._seeded = int(state["seed"]), bool(state["seeded"])

    def render_env(self, e: int = 0) -> Any:
        raise NotImplementedError("envs in worker processes do not render; use env_workers=0")

    def close(self) -> None:
        """Stop the workers (a hung one is killed)."""
        for conn, proc in zip(self._conns, self._procs, strict=True):
            try:
                if proc.is_alive() and self._waiting is None:
                    conn.send(("close", None))
                    if conn.poll(5.0):
                        conn.recv()
            except (OSError, EOFError, BrokenPipeError):
                pass
            proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
        self._local.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        for proc in getattr(self, "_procs", []):
            if proc.is_alive():
                proc.kill()

    # ------------------------------------------------------------------ plumbing
    def _published(self, a: int, b: int) -> tuple[np.ndarray | None, ...]:
        """Envs ``a .. b - 1``'s part of the step a worker wrote into shared memory (views;
        :meth:`step_wait` concatenates them into fresh arrays)."""
        return tuple(self._out[name][a:b] if name in self._out else None for name in FIELDS)

    def _size(self, start: int) -> int:
        return dict(self._slices)[start] - start

    def _index(self, start: int) -> int:
        return [a for a, _ in self._slices].index(start)

    def _send_all(self, message: Callable[[int], tuple[str, Any]]) -> None:
        """Send worker w (slice w + 1) ``message(start of its slice)``."""
        for w, ((a, _), conn) in enumerate(zip(self._slices[1:], self._conns, strict=True)):
            try:
                conn.send(message(a))
            except (OSError, BrokenPipeError):
                self._fail(w, "died")

    def _recv_all(self) -> list[Any]:
        """Every worker's answer, in slice order."""
        out = []
        for w, conn in enumerate(self._conns):
            try:
                if not poll_ready(conn, self.timeout):
                    self._fail(w, f"answered nothing for {self.timeout:g} s (hung)")
                status, value = conn.recv()
            except (EOFError, OSError):
                self._fail(w, "died")
            if status == "error":
                self._fail(w, f"failed: {value}")  # the cause, one line (worker_side.cause)
            out.append(value)
        return out

    def _stop_all(self) -> None:
        """Kill every worker still alive (they ignore SIGTERM) and wait for it."""
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)

    def _fail(self, w: int, what: str) -> None:
        """Stop every worker and raise the one line of worker ``w``'s failure ``what`` (for a
        worker gone, ``died``: how it ended)."""
        proc = self._procs[w]
        if proc.is_alive() and "hung" in what:
            proc.kill()
        proc.join(timeout=1.0)
        code = proc.exitcode
        if what == "died" and code is not None:
            how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
                   signal.valid_signals() else f"exit code {code}")
            what = f"died ({how})"
        self._stop_all()
        a, b = self._slices[w + 1]
        raise EnvWorkerError(f"env worker {w + 1} (envs {a}-{b - 1}, pid {proc.pid}) {what}")
