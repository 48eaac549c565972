"""Small configurations shared by several test modules.

Tests that only need *some* small sweep use the same one, so that its XLA programs are
compiled once per worker (and, with the compilation cache on, once per session) instead of
once per test with slightly different shapes.
"""

# prompt-convergence: 3 prompt lengths + 3 ESS levels = 6 points, 4 prompts per point
# (divisible by 1, 2 and 4 devices)
PROMPT_SMALL = ["Ls=50,100,150", "reps=4", "quad_levels=0.5,1.0,2.0", "L_ess=100",
                "reps_ess=8"]

# denoise-fig2: a trained simulation, 4 seeds batched (divisible by 1, 2 and 4 devices)
DENOISE_SMALL = ["steps=40", "eval_every=20", "seeds=4", "single_head_starts=1",
                 "gh_order=10"]
