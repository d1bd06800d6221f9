"""Offscreen rendering and MP4 writing for ``python -m rlzoo.evaluate RUN_DIR --video``.

MuJoCo renders offscreen through one of three OpenGL back ends, chosen by the ``MUJOCO_GL``
environment variable **before** ``mujoco`` is imported: ``egl`` (a headless GPU or Mesa's software
EGL), ``osmesa`` (pure software) or ``glfw`` (needs a display). On a machine without a display and
without ``MUJOCO_GL`` set, :func:`prepare_offscreen_rendering` picks ``egl``. The system packages
(Debian/Ubuntu):

* EGL: ``apt-get install libegl1 libgl1-mesa-dri`` (Mesa; with an NVIDIA driver its own EGL works);
* OSMesa: ``apt-get install libosmesa6`` and ``MUJOCO_GL=osmesa`` (slower).

Classic-control envs (Pendulum) and MPE draw with pygame and need no OpenGL. Frames are encoded
to H.264 MP4 with ``imageio`` and the ffmpeg binary that ``imageio-ffmpeg`` ships
(``pip install 'rlzoo[video]'``); :class:`GifPreview` encodes a small GIF of them for
TensorBoard's Images tab with pillow (which imageio requires). Every failure is a ``UserError``
with the fix in its message.
"""

from __future__ import annotations

import importlib.util
import io
import math
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from rlzoo.errors import UserError

DEFAULT_FPS = 30  # used when an env's metadata has no render_fps
RENDER_HELP = (
    "install an offscreen OpenGL back end (Debian/Ubuntu: apt-get install libegl1 "
    "libgl1-mesa-dri, then MUJOCO_GL=egl; or apt-get install libosmesa6, then MUJOCO_GL=osmesa)"
)


def headless() -> bool:
    """True when no X11 or Wayland display is available to this process."""
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def prepare_offscreen_rendering() -> str | None:
    """Set ``MUJOCO_GL=egl`` (and pygame's ``SDL_VIDEODRIVER=dummy``) when unset and there is
    no display; return the MuJoCo back end.

    Best before anything imports ``mujoco`` (which also reads the variable, at import); gymnasium
    reads it again when an env first renders. Returns ``MUJOCO_GL``'s value, or None when it is
    unset and a display is present (gymnasium then tries GLFW, EGL, OSMesa in turn).
    """
    if "MUJOCO_GL" not in os.environ and headless():
        os.environ["MUJOCO_GL"] = "egl"  # gymnasium reads it when an env first renders
    if headless():  # pygame (classic control, MPE) draws offscreen without a display either
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    load_triton_first()
    return os.environ.get("MUJOCO_GL")


def load_triton_first() -> None:
    """Import ``torch._dynamo`` (and with it ``triton``, when installed) before any GL back end.

    torch imports ``torch._dynamo`` lazily, e.g. when the first optimizer is built; it imports
    ``triton`` where one is installed (CUDA builds of torch ship it). Loaded after Mesa's EGL or
    OSMesa, whose software rasteriser links its own LLVM, ``libtriton.so``'s LLVM static
    initialisers crash (SIGSEGV in ``llvm::DebugCounter``, seen with triton 3.8 and Mesa on
    Debian 12); loaded first, both work. Without triton there is nothing to order.
    """
    if importlib.util.find_spec("triton") is not None:
        import torch._dynamo  # noqa: F401


def check_video_writer() -> None:
    """Fail in one line if ``imageio`` or its ffmpeg binary is missing."""
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as err:
        raise UserError(
            f"writing MP4 needs imageio and imageio-ffmpeg ({type(err).__name__}: {err}); "
            "pip install imageio imageio-ffmpeg (rlzoo's video extra: pip install -e '.[video]')"
        ) from None


def render_frame(env: Any, what: str) -> np.ndarray:
    """``env.render()`` as an ``[H, W, 3]`` uint8 frame; a failure is a one-line ``UserError``.

    ``what`` names the env in the message (e.g. ``Hopper-v5``).
    """
    try:
        frame = env.render()
    except Exception as err:  # noqa: BLE001 - GL back ends fail with many exception types
        raise UserError(
            f"cannot render {what} offscreen (MUJOCO_GL={os.environ.get('MUJOCO_GL', 'unset')}: "
            f"{type(err).__name__}: {err}); {RENDER_HELP}"
        ) from None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise UserError(
            f"{what} returned no RGB frame from render() (got {type(frame).__name__}); it does "
            "not support render_mode='rgb_array', so evaluate it without --video"
        )
    return frame[..., :3]


class VideoWriter:
    """Streams frames into one MP4 file (frames are not kept in memory).

    Args:
        path: the ``.mp4`` file to write (parent folders are created).
        fps: frames per second (the env's ``render_fps``: one frame per env step).
    """

    def __init__(self, path: Path, fps: int) -> None:
        import imageio.v2 as imageio

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.frames = path, 0
        # macro_block_size=2: any even frame size is encoded as is (yuv420p needs even sizes).
        self._writer = imageio.get_writer(
            str(path), fps=fps, codec="libx264", macro_block_size=2, ffmpeg_log_level="error"
        )

    def append(self, frame: np.ndarray) -> None:
        """Add one ``[H, W, 3]`` uint8 frame (odd sizes are cropped by one pixel)."""
        h, w = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2
        self._writer.append_data(np.ascontiguousarray(frame[:h, :w]))
        self.frames += 1

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def render_fps(env: Any) -> int:
    """The env's ``metadata['render_fps']`` (MaMuJoCo: its single-agent env's), else 30."""
    for candidate in (env, getattr(env, "single_agent_env", None), getattr(env, "unwrapped", None)):
        metadata = getattr(candidate, "metadata", None) or {}
        if metadata.get("render_fps"):
            return int(round(metadata["render_fps"]))
    return DEFAULT_FPS


class GifPreview:
    """A small animated GIF of an episode's frames (TensorBoard's Images tab shows GIFs), kept in
    memory at most ``frames`` frames of at most ``side`` pixels a side: every ``s``-th pixel, and
    every ``k``-th frame, ``k`` doubled each time the frames kept would pass ``frames``."""

    def __init__(self, side: int, frames: int) -> None:
        self.side, self.limit = side, max(frames, 2)
        self.frames: list[np.ndarray] = []
        self.keep, self.seen = 1, 0

    def add(self, frame: np.ndarray) -> None:
        if self.seen % self.keep == 0:
            stride = max(1, math.ceil(max(frame.shape[:2]) / self.side))
            self.frames.append(np.ascontiguousarray(frame[::stride, ::stride, :3]))
            if len(self.frames) > self.limit:
                self.frames, self.keep = self.frames[::2], self.keep * 2
        self.seen += 1

    def size(self) -> tuple[int, int]:
        """``(height, width)`` of the frames kept (``(0, 0)`` before the first)."""
        return self.frames[0].shape[:2] if self.frames else (0, 0)

    def encode(self, fps: float) -> bytes:
        """The GIF file's bytes, looping, each frame shown ``keep / fps`` seconds."""
        from PIL import Image

        images = [Image.fromarray(frame) for frame in self.frames]
        out = io.BytesIO()
        images[0].save(out, format="GIF", save_all=True, append_images=images[1:], loop=0,
                       duration=max(20, round(1000 * self.keep / fps)))
        return out.getvalue()
