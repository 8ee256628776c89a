"""The library's boundaries: tandem_eval/ evaluates, trainer/ trains and depends on tandem_eval, never the reverse.

PYTHONPATH=$PWD python -m pytest -q tests/test_layering.py
"""

from __future__ import annotations

import re
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "tandem_eval"
# an optimizer, a backward pass or an optimizer step: the signs of a training loop
TRAINING = re.compile(r"torch\.optim|\.backward\(|optim\w*\.step\(|zero_grad\(")


def _sources() -> list[Path]:
    files = sorted(LIBRARY.rglob("*.py"))
    assert len(files) > 20, "the library's sources were not found"
    return files


def test_no_optimizer_loop_in_the_evaluation_library():
    hits = [
        f"{f.relative_to(LIBRARY.parent)}:{m.group(0)}" for f in _sources() for m in TRAINING.finditer(f.read_text())
    ]
    assert not hits, f"training code inside tandem_eval/ (move it under trainer/): {hits}"


def test_the_evaluation_library_never_imports_the_trainer():
    pattern = re.compile(r"^\s*(from trainer[\s.]|import trainer\b)", re.M)
    # the demo's fallback (no bundled checkpoints) may build a tiny random pair with trainer.tiny
    hits = [str(f.relative_to(LIBRARY.parent)) for f in _sources() if pattern.search(f.read_text())]
    assert hits == ["tandem_eval/demo.py"], hits


def test_the_pattern_sees_a_training_loop():
    assert TRAINING.search("opt = torch.optim.AdamW(model.parameters())\nloss.backward()\nopt.step()")
