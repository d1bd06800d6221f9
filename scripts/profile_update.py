"""Where the time of one update goes, grouped by kind of op, on this machine.

    python scripts/profile_update.py [--algo sac] [--env Hopper] [--updates 200]

Builds the algorithm from the same config as `scripts/bench_throughput.py` (batch 256, 256x256,
lr 3e-4), runs updates on synthetic batches under `torch.profiler` and prints a table of the
self CPU time per update by group (matmul kernels, activations, optimizer, polyak, other
elementwise work, the rest), then the 15 most expensive ops.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_throughput import ENV_IDS, benchmark_model  # noqa: E402

GROUPS = {
    "matmul kernels (`bmm`, `baddbmm`, `mm`), forward and backward":
        {"aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm"},
    "activations forward and backward":
        {"aten::clamp_min", "aten::threshold_backward", "aten::relu", "aten::gelu",
         "aten::gelu_backward"},
    "optimizer steps (fused Adam kernel, step counters, the step wrapper)":
        {"aten::_fused_adam_", "Optimizer.step#Adam.step", "aten::_foreach_add_", "aten::add_"},
    "polyak step (`foreach` lerp)": {"aten::_foreach_lerp_", "aten::lerp_"},
    "other elementwise ops and reductions (losses, log-prob, value head)":
        {"aten::mul", "aten::add", "aten::sum", "aten::sub", "aten::mean", "aten::min",
         "aten::exp", "aten::tanh", "aten::softplus", "aten::neg", "aten::pow", "aten::div",
         "aten::div_", "aten::clamp", "aten::cat", "aten::normal_", "aten::sqrt",
         "aten::softplus_backward", "aten::tanh_backward", "aten::where", "aten::addcmul_",
         "aten::log", "aten::huber_loss", "aten::huber_loss_backward"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--env", default="Hopper", choices=sorted(ENV_IDS))
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()

    model, batches = benchmark_model(args.algo, args.env)
    for i in range(30):
        model.update(batches[i % 8])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(args.updates):
            model.update(batches[i % 8])
    events = prof.key_averages()
    per_update = {e.key: e.self_cpu_time_total / args.updates / 1e3 for e in events}
    total = sum(per_update.values())
    print(f"# {args.algo} on {args.env}: {total:.2f} ms self CPU per update "
          f"({args.updates} updates, {torch.get_num_threads()} threads)")
    print("| part | ms (self CPU) | share |\n| --- | --- | --- |")
    grouped: set[str] = set()
    for name, keys in GROUPS.items():
        ms = sum(v for k, v in per_update.items() if k in keys)
        grouped |= keys
        print(f"| {name} | {ms:.2f} | {100 * ms / total:.0f}% |")
    rest = sum(v for k, v in per_update.items() if k not in grouped)
    print(f"| everything else (autograd's graph walk, views, copies, allocations, dispatch) | "
          f"{rest:.2f} | {100 * rest / total:.0f}% |")
    print("\n" + events.table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
