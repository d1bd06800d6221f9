"""The worker processes' side of ``env_workers`` (``rlzoo.envs.workers``): the shared-memory
layout of a vector step and the loop a worker runs (:func:`serve`).

A worker makes its slice of envs, says ``ready`` (with their shapes) or ``error`` (the cause, in
one line), then answers the parent's requests; a step's arrays go through shared memory, float32
and bool as the VecEnv contract types them (another dtype goes by pipe, unchanged).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlzoo.envs.base import StepResult, VecEnv
from rlzoo.errors import UserError, one_line

__all__ = ["FIELDS", "Layout", "MakeEnv", "layout_offsets", "layout_views", "poll_ready",
           "serve", "shapes", "step_layout"]

MakeEnv = Callable[[int, int], VecEnv]  # (num_envs, seed) -> an in-process VecEnv


SPIN_S = 0.002  # seconds a process asks its pipe without blocking before it sleeps on it


def poll_ready(conn: Any, timeout: float | None) -> bool:
    """Whether ``conn`` has a message within ``timeout`` seconds (None: wait for ever). For the
    first ``SPIN_S`` it polls without sleeping: an answer that comes within a vector step's time
    is read without a wake-up by the scheduler (about 0.1 ms a round trip through a sleeping
    pipe on a 2-core VM), at the price of that much CPU while it waits."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    end = time.perf_counter() + SPIN_S
    while time.perf_counter() < end:
        if poller.poll(0):
            return True
        os.sched_yield()  # a process waiting for this core gets it (a busy machine)
    left = None if timeout is None else max(0.0, timeout - SPIN_S)
    return bool(poller.poll(None if left is None else int(min(left, 1e6) * 1000)))


# a step's arrays besides the observation, in StepResult's order; a worker writes its slice of
# them into shared memory (float32 and bool, as the VecEnv contract has them)
FIELDS = ("reward", "terminated", "truncated", "reset_step", "state", "agent_reward")
Layout = list[tuple[str, Any, tuple[int, ...]]]  # (field, dtype, shape [E, ...])


def step_layout(E: int, n_agents: int, state_dim: int, multi_agent: bool) -> Layout:
    """The shared step arrays of ``E`` envs: ``reward [E]`` float32, three ``[E]`` bool flags,
    ``state [E, S]`` and ``agent_reward [E, N]`` float32 where the env has them."""
    out: Layout = [("reward", np.float32, (E,))]
    out += [(flag, np.bool_, (E,)) for flag in ("terminated", "truncated", "reset_step")]
    if state_dim:
        out.append(("state", np.float32, (E, state_dim)))
    if multi_agent:
        out.append(("agent_reward", np.float32, (E, n_agents)))
    return out


def layout_offsets(layout: Layout) -> tuple[list[int], int]:
    """Each array's byte offset in the shared buffer (8-byte aligned), and its size."""
    offsets, end = [], 0
    for _, dtype, shape in layout:
        offsets.append(end)
        end = (end + int(np.prod(shape)) * np.dtype(dtype).itemsize + 7) // 8 * 8
    return offsets, end


def layout_views(buf: Any, layout: Layout) -> dict[str, np.ndarray]:
    """Numpy views of ``layout``'s arrays in the shared buffer ``buf``."""
    offsets, _ = layout_offsets(layout)
    return {name: np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape)),
                                offset=offset).reshape(shape)
            for (name, dtype, shape), offset in zip(layout, offsets, strict=True)}


def _publish(result: StepResult, out: dict[str, np.ndarray], start: int) -> bool:
    """Write ``result``'s arrays into rows ``start ..`` of the shared ``out``; False (nothing
    written) when one has another dtype or shape than the contract's (then it goes by pipe)."""
    n = len(result.reward)
    for name in FIELDS:
        value, view = getattr(result, name), out.get(name)
        if value is None and view is None:
            continue
        if value is None or view is None or np.asarray(value).dtype != view.dtype or \
                np.shape(value) != view[start:start + n].shape:
            return False
    for name in FIELDS:
        if name in out:
            out[name][start:start + n] = getattr(result, name)
    return True


def _cause(err: BaseException) -> str:
    """``err`` in one line: a ``UserError``'s own line, else ``Type: message``."""
    return one_line(err if isinstance(err, UserError) else f"{type(err).__name__}: {err}", 400)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no orphans after a SIGKILL)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:  # pragma: no cover - no libc: daemon processes still end with a clean exit
            pass


def serve(make: MakeEnv, n: int, seed: int, conn: Any, obs_buf: Any, act_buf: Any,
           start: int, obs_shape: tuple[int, ...], act_shape: tuple[int, ...], total: int,
           step_buf: Any, layout: Layout) -> None:
    """A worker: build envs ``start .. start + n - 1``, say whether that worked (``ready`` with
    their shapes, or ``error`` with the cause), and answer the parent's requests."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    obs = np.frombuffer(obs_buf, dtype=np.float32).reshape(total, *obs_shape)[start:start + n]
    act = np.frombuffer(act_buf, dtype=np.float32).reshape(total, *act_shape)[start:start + n]
    out = layout_views(step_buf, layout)
    try:
        env = make(n, seed)
    except BaseException as err:  # noqa: BLE001 - the cause goes to the parent, in one line
        conn.send(("error", _cause(err)))
        return
    conn.send(("ready", shapes(env)))
    while True:
        try:
            poll_ready(conn, None)
            cmd, arg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if cmd == "step":
                r = env.step(act.copy(), active=arg)
                obs[:] = r.obs
                conn.send(("ok", None if _publish(r, out, start) else
                           tuple(getattr(r, name) for name in FIELDS)))
            elif cmd == "reset":
                o, s = env.reset(seed=arg)
                obs[:] = o
                conn.send(("ok", s))
            elif cmd == "get_state":
                conn.send(("ok", env.get_state()))
            elif cmd == "set_state":
                env.set_state(arg)
                conn.send(("ok", None))
            elif cmd == "close":
                env.close()
                conn.send(("ok", None))
                return
        except Exception as err:  # noqa: BLE001 - reported in the parent, in one line
            conn.send(("error", _cause(err)))


def shapes(env: VecEnv) -> tuple[Any, ...]:
    """What the workers' envs must share with this process's: the arrays' shapes."""
    return tuple(env.obs_shape), tuple(env.act_shape), int(env.n_agents), int(env.state_dim)
