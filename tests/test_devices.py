"""Device and dtype are chosen in one place (tandem_eval/devices.py), and the HF engine has no CPU-only
assumption: auto is fp32 on CPU (old runs keep their fingerprints) and bf16 on CUDA (exercised by
faking torch's CUDA answers), the engine runs in bf16, and the row attention runs on a device that
holds no data (meta), so any host read or a tensor left on another device fails here as on a GPU.

PYTHONPATH=$PWD python -m pytest -q tests/test_devices.py
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from tandem_eval.cli import main as cli
from tandem_eval.config import Sampling
from tandem_eval.devices import default_device, resolve_dtype, torch_dtype, usable_device
from tandem_eval.engines.base import Request, generate
from tandem_eval.engines.hf import HFEngine
from tandem_eval.engines.hf_rows import PackedForward, RowStore
from tandem_eval.schemas import ConfigError

SAMPLED = Sampling(temperature=1.0, top_p=0.95, top_k=50)
needs_cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU decision; this machine has a GPU")


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch answers as on a bf16-capable CUDA machine (nothing is moved: tests that load a model
    also stub Module.to)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)


@needs_cpu_only
def test_auto_is_float32_on_cpu_and_an_explicit_dtype_wins():
    assert default_device() == "cpu" and resolve_dtype("auto") == "float32"
    assert [resolve_dtype(d) for d in ("float32", "bfloat16", "float16")] == ["float32", "bfloat16", "float16"]
    assert torch_dtype("auto") is torch.float32 and torch_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ConfigError, match="valid: auto, float32, bfloat16, float16"):
        resolve_dtype("float64")


def test_auto_is_bfloat16_on_cuda_float16_without_bf16_and_float32_for_a_cpu_placement(fake_cuda, monkeypatch):
    assert default_device() == "cuda" and resolve_dtype("auto") == "bfloat16"
    assert resolve_dtype("auto", "cpu") == "float32"  # the device the model goes to decides
    assert resolve_dtype("float32") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # e.g. a V100
    assert resolve_dtype("auto") == "float16"


@needs_cpu_only
def test_a_cuda_device_that_is_not_there_is_dropped_not_used():
    assert usable_device("cuda") is None and usable_device("cuda:1") is None  # lm-eval's --device default
    assert usable_device("cpu") == "cpu" and usable_device(None) is None


def test_usable_device_keeps_cuda_on_a_gpu_machine(fake_cuda):
    assert usable_device("cuda:0") == "cuda:0"


def _command_options(command) -> dict:
    """A command's options at their defaults, as typer passes them (no option given)."""
    return {name: p.default for name, p in inspect.signature(command).parameters.items()}


@needs_cpu_only
def test_the_commands_record_the_resolved_dtype_and_keep_cpu_fingerprints(monkeypatch):
    for mode, command in (("solo", cli.solo), ("handoff", cli.handoff)):
        options = _command_options(command)
        assert options["dtype"] == "auto"
        auto = cli.run_config(mode, options)
        explicit = cli.run_config(mode, {**options, "dtype": "float32"})  # what every CPU run so far recorded
        assert auto.senior.dtype == "float32" and auto.fingerprint() == explicit.fingerprint()
        assert auto.junior is None or auto.junior.dtype == "float32"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    on_gpu = cli.run_config("handoff", _command_options(cli.handoff))
    assert (on_gpu.senior.dtype, on_gpu.junior.dtype) == ("bfloat16", "bfloat16")
    assert on_gpu.fingerprint() != explicit.fingerprint()  # another dtype is another experiment


def _prompts(tok) -> list[list[int]]:
    return [tok.encode(t) for t in ("Tom has 3 apples", "The answer is \\boxed{7}.\n\nSo Li has", "x")]


def test_hf_engine_generates_and_scores_in_bfloat16(tiny_pair):
    senior, _ = tiny_pair
    bf16, fp32 = HFEngine(senior, SAMPLED, dtype="bfloat16", max_batch=2), HFEngine(senior, SAMPLED, max_batch=2)
    assert next(bf16.model.parameters()).dtype is torch.bfloat16 and bf16.device.type == default_device()
    prompts = _prompts(bf16.tokenizer)
    outs = generate(bf16, [Request(i, p, 20, seed=i) for i, p in enumerate(prompts)])  # 3 traces, 2 rows
    assert all(len(o.token_ids) > 0 and len(o.token_ids) == len(o.logprobs) for o in outs)
    assert all(t.dtype is torch.bfloat16 for t in bf16._store.k.values())  # the KV rows hold the run dtype
    conts = [o.token_ids for o in outs]
    lp16, lp32 = bf16.score(prompts, conts), fp32.score(prompts, conts)
    assert all(a.dtype == np.float64 and np.isfinite(a).all() for a in lp16)  # fp32 log-probs from bf16 weights
    assert max(float(np.abs(a - b).max()) for a, b in zip(lp16, lp32)) < 0.1  # the same model, rounded
    # the sampled token's log-prob is the generating forward's: teacher forcing gives it back up to rounding
    assert max(float(np.abs(np.asarray(o.logprobs) - s).max()) for o, s in zip(outs, lp16)) < 0.1
    kl = bf16.exact_kl(bf16, prompts, prompts, conts)  # a model against itself, same batches: exactly 0
    assert all(float(np.abs(r["kl"]).max()) == 0.0 for r in kl)


def test_hf_engine_takes_the_device_and_dtype_devices_py_picks(tiny_pair, fake_cuda, monkeypatch):
    """On a CUDA machine an engine given neither device nor dtype goes to "cuda" in bfloat16. The move
    itself is stubbed (no GPU here), so the engine then runs where the weights are: on CPU, in bf16."""
    moved = []

    def to(self, *args, **kwargs):
        moved.append(args[0] if args else kwargs.get("device"))
        return self

    monkeypatch.setattr(torch.nn.Module, "to", to)
    engine = HFEngine(tiny_pair[0], SAMPLED, max_batch=2)
    assert moved == ["cuda"] and next(engine.model.parameters()).dtype is torch.bfloat16
    [out] = generate(engine, [Request("a", _prompts(engine.tokenizer)[0], 8, seed=1)])
    assert len(out.token_ids) == 8


@pytest.mark.parametrize("window, softcap", [(None, None), (4, None), (None, 30.0)])
def test_row_attention_keeps_every_tensor_on_the_engine_device(window, softcap):
    """The meta device has shapes but no data: reading a value back to the host (a GPU sync) raises, and so
    would mixing in a tensor made on another device. Two short feeds (padded) and a long one, as an engine step."""
    store = RowStore(rows=4, length=16)
    fwd = PackedForward(store, [0, 1], [3, 5], [1, 2], [(2, 0, 6)], "meta")
    t = 1 + 2 + 6
    q, kv = torch.empty(1, 4, t, 8, device="meta"), torch.empty(1, 2, t, 8, device="meta")  # 4 heads, 2 KV heads
    out = fwd.attend(0, q, kv, kv, window, None, softcap)
    assert out.shape == (1, t, 4, 8) and out.device.type == "meta"
    assert {x.device.type for x in (store.k[0], store.v[0], fwd.pos, fwd.slot, fwd.short_slots)} == {"meta"}
    store._swap(0, 3, 4)  # a row swap (RowStore.compact) indexes on the cache's device too
