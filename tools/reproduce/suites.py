"""The suites, as data: every task, row and setting of ``python -m tools.reproduce SUITE`` is
declared here once (the shapes are in :mod:`tools.reproduce.schema`).

To add a row: a :class:`Row` with its label and rlzoo overrides (and a ``note`` for the page, and
``against`` for the rows it is set against) in the suite's ``rows``; a task that runs a subset of
the rows names it in its :class:`SuiteTask` ``rows``. A row with a published curve is set beside
it in :mod:`tools.reproduce.references`.
"""

from __future__ import annotations

from tools.reproduce.schema import Row, Suite, SuiteTask

# the suites of the repository's results page, in order
PAGE_SUITES = ("mujoco", "long", "marl", "gpu")


STAC_FIRST = ("critic.pessimism=0.25", "critic.layer_norm=true", "critic.dropout=0.01",
              "algo.actor.layer_norm=true", "algo.actor.dropout=0.01",
              "algo.actor.log_std_squash=clamp", "algo.actor.eval_samples=0",
              "tuner.loss_form=log_alpha", "tuner.alpha_optimizer=adam",
              "tuner.target_entropy=null")
"""`algo=stac`'s defaults before the author's settings (commit f3b34c6), as overrides of
today's: the settings the `stac` cells on the page ran with (bc30ab2); tests/test_reproduce.py
checks that they compose to those cells' configs."""


MUJOCO_ROWS = (
    Row("sac", ("algo=sac",)),
    Row("td3", ("algo=td3",)),
    Row("dsac_t", ("algo=dsac_t",)),
    Row("sac-ensemble", ("algo=sac", "critic=ensemble"), against=("sac",),
        note="SAC (rlzoo's SAC defaults, one update per env step) with a 10-member critic "
             "ensemble, targets from the min of a random pair (REDQ's critic, not REDQ's 20 "
             "updates per step; the published ensemble numbers are REDQ's, e.g. SimbaV2's "
             "baselines, so no reference)"),
    Row("sac-action_sequence", ("algo=sac", "critic=action_sequence"),
        against=("sac", "sac-n_step4"),
        note="SAC with a critic of 4-action chunks executed open-loop (Q-chunking's form: "
             "the actor outputs 4 x |A|, targets sum the chunk's 4 discounted rewards and "
             "bootstrap with gamma^4 from the state after it, cut at episode ends; target "
             "entropy -4|A| per chunk, SAC's per step; one update per env step, so four per "
             "chunk; evaluated open-loop too; nothing is published on these tasks at these "
             "budgets, so no reference)"),
    Row("simbav2", ("algo=simbav2",), against=("sac",),
        note="SimbaV2 with the reference's gym-MuJoCo defaults (conf/algo/simbav2.yaml: "
             "hyperspherical 128x1-block actor and 512x2-block twin categorical critic, "
             "observation and reward normalization, 5,000 random steps) at one update per env "
             "step: the setting of the reference's UTD-1 curve; its headline baseline makes 2 "
             "updates per step"),
    Row("flashsac", ("algo=flashsac",), against=("sac",),
        note="FlashSAC with the reference's gym-MuJoCo defaults (conf/algo/flashsac.yaml: "
             "scripts/run_mujoco.sh's CPU-simulator settings, batch 512, 10,000 random steps, "
             "norm-bounded batch-normalized 128x2-block actor and 256x2-block twin categorical "
             "critic, reward scaling, actor every 2nd update, repeated exploration noise) at one "
             "update per env step"),
    Row("stac", ("algo=stac", *STAC_FIRST), against=("sac",),
        note="STAC (arXiv:2601.00737) with rlzoo's first settings (`algo=stac`'s defaults until "
             "commit f3b34c6, pinned by this row's overrides): one Gaussian critic, targets "
             "mu' - 0.25 sigma' on every task (beta 0.25, the paper's setting for Ant and "
             "Humanoid; its best per task, Table 4, is 0.5 on Hopper and 0 on HalfCheetah), "
             "LayerNorm and dropout 0.01 in actor and critic (the paper's best on Hopper; on "
             "HalfCheetah none), Adam on log alpha, the std exp of the clamped log std, "
             "evaluation at tanh(mean), 10,000 random steps, lr 3e-4; `stac-author` is STAC as "
             "its author ran it"),
    Row("stac-author", ("algo=stac",), against=("sac", "stac"),
        note="STAC as its author ran it (today's `algo=stac`: the author's rl-warehouse and "
             "logged runs): per-task beta, dropout and LayerNorm (Hopper 0.5 with both; "
             "HalfCheetah 0 with neither), the temperature stepped on alpha itself, a softplus "
             "std, evaluation averaging 10 sampled actions"),
    Row("sac-categorical", ("algo=sac", "critic=categorical"), against=("sac",),
        note="SAC (rlzoo's SAC defaults) with the categorical critic of SimbaV2 and FlashSAC: "
             "twin C51 distributions on 101 atoms in [-1000, 1000] (no reward scaling), the "
             "smaller member's distribution as target, cross-entropy loss; not SimbaV2's "
             "networks, normalizers or schedule"),
)


# Controls: each changes a few named settings of a main row, to separate one cause of a gap the
# page reports; run where that gap is (SuiteTask.rows), seeds 0..K-1 as every row.
CONTROL_ROWS = (
    Row("sac-n_step4", ("algo=sac", "algo.n_step=4"),
        note="control for `sac-action_sequence`: SAC's row with 4-step returns "
             "(`algo.n_step=4`, cut at episode ends), whose targets, as the chunked critic's, "
             "sum 4 discounted rewards and bootstrap with gamma^4; what `sac-action_sequence` "
             "gains beyond this row comes from the chunked actions and critic",
        against=("sac",)),
    Row("dsac_t-sac_start", ("algo=dsac_t", "tuner.init_alpha=1.0", "tuner.lr=1e-3",
                             "algo.actor_lr=3e-4", "algo.critic_lr=1e-3", "algo.policy_delay=1",
                             "algo.target_delay=1", "algo.learning_starts=5000"),
        note="control for `dsac_t`: DSAC-T with SAC's start (learning rates 3e-4 actor, 1e-3 "
             "critic and temperature; initial temperature 1; no delays; 5,000 random steps), "
             "DSAC-T's networks (3x256 GELU), log-std clamp and distributional critic kept",
        against=("dsac_t", "sac")),
)


# The distributional critics as the multi-agent critics, each against its algorithm's own row at
# the same budget (env steps, updates, batch, warm-up): one change, the critic kind. HASAC's base
# critic is a twin, and so are these (2 members); MADDPG's is one Q per agent, and these rows give
# each agent one distribution too (critic.n=1). The categorical support is fixed (no reward
# scaling) and wide enough for these tasks' early returns; values beyond it are clipped.
CATEGORICAL_SUPPORT = ("critic.v_min=-200", "critic.v_max=200")


MARL_CRITIC_ROWS = (
    Row("hasac-distributional", ("algo=hasac", "critic=distributional"), against=("hasac",),
        note="HASAC with DSAC-T's Gaussian critic (2 members, DSAC-T's loss) as its centralized "
             "critic over the global state and the joint action, otherwise HASAC's row"),
    Row("hasac-categorical", ("algo=hasac", "critic=categorical", *CATEGORICAL_SUPPORT),
        against=("hasac",),
        note="HASAC with a categorical centralized critic (2 members, 101 atoms on [-200, 200], "
             "C51's projected cross-entropy), otherwise HASAC's row"),
    Row("maddpg-distributional", ("algo=maddpg", "critic=distributional", "critic.n=1"),
        against=("maddpg",),
        note="MADDPG with one DSAC-T Gaussian critic per agent (its own reward, DSAC-T's loss), "
             "otherwise MADDPG's row"),
    Row("maddpg-categorical", ("algo=maddpg", "critic=categorical", "critic.n=1",
                               *CATEGORICAL_SUPPORT), against=("maddpg",),
        note="MADDPG with one categorical critic per agent (101 atoms on [-200, 200]), "
             "otherwise MADDPG's row"),
)


MARL_CRITIC_LABELS = tuple(row.label for row in MARL_CRITIC_ROWS)


SB3_ROWS = (
    Row("sb3_sac", ("algo=sac",), peer="sac"),
    Row("sb3_td3", ("algo=td3",), peer="td3"),
)


CROSSQ_ROW = Row(
    "crossq", ("algo=crossq",), against=("sac",),
    note="CrossQ with sb3-contrib 2.9.2's defaults (conf/algo/crossq.yaml: SAC without target "
         "networks, one critic pass over [s; s'], batch renorm in actor and critic, 1024x1024 "
         "twin critic, Adam betas (0.5, 0.999), actor every 3rd update, 100 random steps); the "
         "published CrossQ curves (SimbaV2 repo, 10 seeds) use the authors' code: 2048-wide "
         "critics, 5,000 random steps")

# TQC at sb3-contrib's TQC settings (lr 3e-4 everywhere, 100 random steps, log std from -20,
# entropy of the [-1, 1] action), on both sides of its peer pair
TQC_SB3 = ("algo=sac", "critic=tqc", "algo.actor_lr=3e-4", "algo.critic_lr=3e-4",
           "tuner.lr=3e-4", "tuner.entropy_units=normalized", "algo.actor.log_std_min=-20",
           "algo.learning_starts=100")

# each rlzoo row beside its peer built from the same config (tools/reproduce/peer_kinds.py)
PEER_PAIR_ROWS = (
    Row("ddpg", ("algo=ddpg",),
        note="DDPG as SB3 builds it (conf/algo/ddpg.yaml: TD3 with one critic, no delay, no "
             "target smoothing; SB3's DDPG defaults with rl-baselines3-zoo's MuJoCo noise 0.1 "
             "and 10,000 random steps)"),
    Row("sb3_ddpg", ("algo=ddpg",), peer="ddpg"),
    Row("tqc", TQC_SB3,
        note="SAC with TQC's critic at sb3-contrib's TQC settings (2 networks x 25 quantiles, "
             "2 dropped per network, 256x256, lr 3e-4, 100 random steps)"),
    Row("sb3c_tqc", TQC_SB3, peer="tqc"),
    CROSSQ_ROW,
    Row("sb3c_crossq", ("algo=crossq",), peer="crossq"),
)


# what the first evaluation measures where every row's warm-up outlasts it (Suite.first_eval)
WARM_UP_FIRST_EVAL = ("every row's random warm-up lasts until at least the first evaluation, "
                      "so it measures the untrained policy")


SUITES: dict[str, Suite] = {
    "mujoco": Suite(
        name="mujoco",
        title="single-agent MuJoCo on the CPU",
        tasks=(SuiteTask("Hopper", "Hopper"),
               SuiteTask("HalfCheetah", "HalfCheetah",
                    tuple(r.label for r in MUJOCO_ROWS + SB3_ROWS) + ("sac-n_step4",)),
               SuiteTask("Walker2d", "Walker2d",
                         ("sac", "td3", "sb3_sac", "sb3_td3", "stac-author")),
               SuiteTask("Ant", "Ant", ("sac", "td3"),
                         not_run="running: 5 seeds a row, one process per seed at one thread "
                                 "beside other jobs")),
        rows=MUJOCO_ROWS + CONTROL_ROWS + SB3_ROWS + (CROSSQ_ROW,),  # crossq: Hopper only
        steps=100_000,          # a cell finished at 50k resumes from its checkpoint to this
        headline_steps=(50_000, 100_000),
        seeds=5,
        eval_every=5_000,       # hits the published 25k / 50k / 100k points
        eval_episodes=10,
        checkpoint_every=5_000,  # about 3-4 minutes of a 5-seed SAC group on 2 cores
        checkpoint_keep=1,
        why="100k env steps, where every published source has a point (the headline also "
            "reads each curve at 50k); each cell's wall time is in the cells table",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="not scheduled: on these 2 cores a 5-seed DSAC-T cell of 50k takes about 2 h "
                "(its control, at 3.7 steps/s, about 3.8 h) and an ensemble-critic cell about "
                "4 h, with no published reference; `simbav2` and `flashsac` cost about 30x SAC "
                "per env step on a CPU (docs/performance.md), about a day per 5-seed cell, so "
                "their cells belong to the `gpu` suite (one `simbav2` seed ran to 30k); the "
                "hours went to the rows with a published reference, the peer, and the variants "
                "with their controls, one seed per process at one thread; `crossq`, added "
                "later: about 17 h a 5-seed 50k cell (docs/performance.md)",
    ),
    "marl": Suite(
        name="marl",
        title="multi-agent MPE and MaMuJoCo on the CPU",
        tasks=(
            SuiteTask("mpe-simple_spread", "mpe/simple_spread",
                 ("maddpg", "hasac", "coma", *MARL_CRITIC_LABELS)),
            SuiteTask("mpe-simple_speaker_listener", "mpe/simple_speaker_listener",
                 ("maddpg", "hasac", "coma", *MARL_CRITIC_LABELS)),
            SuiteTask("mamujoco-HalfCheetah-2x3", "mamujoco/HalfCheetah-2x3",
                 ("maddpg", "hasac", *MARL_CRITIC_LABELS)),
        ),
        rows=(Row("maddpg", ("algo=maddpg",),
                  note="HARL's learning rates, batch, tau and noise, but not its schedule: HARL's "
                       "tuned MPE config makes 50 updates per 1,000 env steps (0.05 per step; "
                       "rlzoo 0.25) after 10,000 random steps (rlzoo 5,000), with 128x128 "
                       "networks on MPE (rlzoo 256x256)"),
              Row("hasac", ("algo=hasac",),
                  note="HARL's learning rates, batch, n-step and networks, but not its schedule "
                       "(0.05 updates per env step after 10,000 random steps in HARL's tuned "
                       "configs; rlzoo 0.25 after 5,000) nor its temperature learning rate "
                       "(HARL 3e-4, rlzoo 1e-3); every temperature starts at 1, as in HARL "
                       "(auto_alpha starts log alpha at 0), and learns with Adam at lr 1e-3 "
                       "(rlzoo's tuner default)"),
              Row("coma", ("algo=coma",),
                  note="on-policy: by 25k env steps COMA has made 129 actor updates "
                       "(summary.json's `updates`: one per rollout of 200 vector steps, reset "
                       "steps included, rlzoo's default), where MADDPG and HASAC make 5,000 (0.25 "
                       "per env step after a 5,000-step warm-up) from replay, so its numbers "
                       "here are the start of its curve"),
              *MARL_CRITIC_ROWS),
        steps=25_000,           # 1,000 MPE episodes; 20,000 steps (5,000 updates) after warm-up
        seeds=5,
        eval_every=2_500,
        eval_episodes=10,
        checkpoint_every=2_500,  # about 5 minutes of a 5-seed MADDPG group on 2 shared cores
        checkpoint_keep=1,
        why="25k env steps per task; a 5-seed cell took 8-103 minutes on 2 shared cores "
            "(docs/reproducing.md)",
        first_eval="at 2,500 steps: for MADDPG and HASAC inside their 5,000-step random warm-up, "
                   "so the untrained policy; COMA, on-policy, has made about 12 updates by then",
        not_run="not run yet: the distributional-critic rows were added after the other cells "
                "ran; each is a 5-seed cell of MADDPG's or HASAC's cost or more (the critic's "
                "loss is heavier), about 0.5-2 h on 2 shared cores; on mpe-simple_spread "
                "maddpg-distributional took 0.94 h and maddpg-categorical 0.64 h, on "
                "mamujoco-HalfCheetah-2x3 maddpg-distributional 0.57 h and "
                "hasac-distributional 0.96 h",
    ),
    "gpu": Suite(
        name="gpu",
        title="single-agent MuJoCo at 1M steps on a CUDA GPU",
        tasks=(SuiteTask("Hopper", "Hopper"), SuiteTask("HalfCheetah", "HalfCheetah"),
               SuiteTask("Humanoid", "Humanoid")),
        rows=MUJOCO_ROWS,
        steps=1_000_000,
        seeds=5,
        eval_every=5_000,
        eval_episodes=10,
        checkpoint_every=50_000,
        checkpoint_keep=1,
        overrides=("device=cuda",),
        why="1M env steps, the papers' budget; needs a CUDA GPU",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="needs a CUDA GPU for the hours one cell takes: none was available to the "
                "maintainers yet",
    ),
    "long": Suite(
        name="long",
        title="SAC to 300k on the CPU (HalfCheetah, Humanoid)",
        # HalfCheetah is here for 300k (its 50k and 100k are the `mujoco` suite's); Humanoid is
        # read along its curve, as the `mujoco` suite reads its tasks at 50k and 100k
        tasks=(SuiteTask("HalfCheetah", "HalfCheetah", headline_steps=(300_000,)),
               SuiteTask("Humanoid", "Humanoid")),
        rows=(Row("sac", ("algo=sac",),
                  note="the `mujoco` suite's `sac` row (rlzoo's SAC defaults), trained on to "
                       "300k env steps; its seeds are new runs, not the 100k cell's continued"),),
        steps=300_000,
        headline_steps=(100_000, 200_000, 300_000),
        seeds=5,
        eval_every=5_000,
        eval_episodes=10,
        checkpoint_every=10_000,  # about 2 minutes of one seed at one thread
        checkpoint_keep=1,
        why="300k env steps, 3x the `mujoco` suite's budget, where the published SAC curves "
            "(which run to 1M) have left their first rise; one seed per process at one thread "
            "(HalfCheetah: 64-87 min a seed beside one other process; each seed's wall time is "
            "in the cells table)",
        first_eval=WARM_UP_FIRST_EVAL,
        not_run="running: one process per seed at one thread, beside other jobs (a 300k "
                "Humanoid seed took 4.8 h so)",
    ),
    "peers": Suite(
        name="peers",
        title="DDPG, TQC and CrossQ beside Stable-Baselines3's and sb3-contrib's, on the CPU",
        tasks=(SuiteTask("Hopper", "Hopper"),),
        rows=PEER_PAIR_ROWS,
        steps=50_000,
        seeds=5,
        eval_every=5_000,
        eval_episodes=10,
        checkpoint_every=5_000,
        checkpoint_keep=1,
        why="50k env steps on Hopper, each rlzoo row beside its peer with the same settings "
            "(the peer's are read from the row's config); the per-step speed of each pair is "
            "in docs/performance.md",
        first_eval="at 5,000 steps: DDPG is still in its 10,000-step random warm-up; TQC and "
                   "CrossQ learn from step 100",
        not_run="not run: the CPU went to other cells; estimated from scripts/bench_peers.py's "
                "one-thread speeds on Hopper (docs/performance.md, a 2-core Xeon at load "
                "average 7-9), per 5-seed cell of 50k steps with one seed per core: ddpg about "
                "2 h (20 steps/s a seed), sb3_ddpg 2 h (18), tqc 4 h (10), sb3c_tqc 5 h (8), "
                "crossq 17 h (2.5), sb3c_crossq 20 h (2.0)",
    ),
    "smoke": Suite(
        name="smoke",
        title="plumbing check (tiny networks; learns nothing)",
        tasks=(SuiteTask("Pendulum", "Pendulum"),),
        rows=(Row("sac", ("algo=sac",)), Row("td3", ("algo=td3",)),
              Row("sb3_sac", ("algo=sac",), peer="sac")),
        steps=300,
        seeds=2,
        eval_every=100,
        eval_episodes=2,
        checkpoint_every=100,
        checkpoint_keep=1,
        overrides=("device=cpu", "algo.learning_starts=100", "algo.actor.hidden=[16]",
                   "critic.hidden=[16]", "log.every=100"),
        why="a few hundred steps: a check of the machinery, not a result",
    ),
}


# the first sentence of a suite's section on the page
LEADS = {"marl": "At 25k env steps this section shows that the multi-agent rows run, not how "
                 "well they do: HARL (MADDPG, HASAC) publishes only figures up to 1e7 steps and "
                 "no COMA numbers for continuous MPE, so there is no reference, and HARL's MPE "
                 "settings were not run here. (HARL's MPE reward gives each agent the sum over "
                 "agents, rlzoo the mean: divide HARL's by the number of agents.)"}
