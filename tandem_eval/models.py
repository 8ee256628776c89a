"""Resolving checkpoints: paths, bundled `toy:` names, the junior recorded by the trainer, and
tokenizer compatibility between senior and junior.

    path = resolve_model("toy:tandem")            # a bundled toy-world checkpoint
    junior = junior_from_metadata(path)           # from tandem_meta.json, if the trainer wrote one
    check_vocab(senior_tok, junior_tok, allow_mismatch=False)
"""

from __future__ import annotations

import json
from pathlib import Path

TOY_DIR = Path(__file__).resolve().parent / "toy" / "checkpoints"
META_FILE = "tandem_meta.json"  # written by trainer/ into every checkpoint it saves


class ModelError(ValueError):
    """A checkpoint cannot be used; the message names the problem and the fix."""


def toy_names() -> list[str]:
    """Bundled toy checkpoints as `toy:NAME` (a folder with config.json under toy/checkpoints)."""
    if not TOY_DIR.exists():
        return []
    return sorted(f"toy:{p.parent.relative_to(TOY_DIR).as_posix()}" for p in TOY_DIR.rglob("config.json"))


def resolve_model(name: str | Path) -> Path:
    """A usable HF-format checkpoint folder for a path or a `toy:NAME`, or a ModelError."""
    name = str(name)
    if name.startswith("toy:"):
        short = name[4:] if "/" in name else f"self-paired/{name[4:]}"  # toy:tandem = the main scenario's
        path = TOY_DIR / short
        if not (path / "config.json").exists():
            valid = ", ".join(toy_names()) or "none bundled in this install"
            raise ModelError(f"unknown toy checkpoint {name!r}; valid: {valid}")
        return path
    path = Path(name).expanduser()
    if not path.exists():
        raise ModelError(f"checkpoint not found: {path} (pass an HF-format folder with config.json, or toy:NAME)")
    if not (path / "config.json").exists():
        raise ModelError(
            f"{path} is not an HF-format checkpoint (no config.json); pass the folder that save_pretrained wrote"
        )
    if not any((path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        raise ModelError(
            f"{path} has no tokenizer files; save the tokenizer next to the weights (tokenizer.save_pretrained(PATH))"
        )
    return path


def metadata(path: Path) -> dict:
    meta = Path(path) / META_FILE
    return json.loads(meta.read_text()) if meta.exists() else {}


def junior_from_metadata(senior: Path) -> str | None:
    """The junior a trainer checkpoint was paired with (relative paths are relative to it)."""
    junior = metadata(senior).get("junior")
    if not junior or str(junior).startswith("toy:"):
        return junior
    p = Path(junior)
    return str(p if p.is_absolute() else (Path(senior) / p).resolve())


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise ModelError(f"cannot load the tokenizer at {path}: {e}") from None


def check_vocab(senior_tok, junior_tok, allow_mismatch: bool = False) -> bool:
    """True when both tokenizers map every string to the same ids. Refuses a mismatch unless allowed."""
    same = len(senior_tok) == len(junior_tok) and senior_tok.get_vocab() == junior_tok.get_vocab()
    if not same and not allow_mismatch:
        raise ModelError(
            f"senior and junior tokenizers differ ({len(senior_tok)} vs {len(junior_tok)} tokens); token-level "
            "handoff needs one vocabulary. Use a junior from the same model family, or pass "
            "--allow-vocab-mismatch for text-level handoff with re-tokenization"
        )
    return same
