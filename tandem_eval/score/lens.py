"""Legibility and drift: how predictable a senior's solo CoTs are to the junior, and how far the
senior's next-token distributions have moved from the junior's along those CoTs.

Both lenses read one senior SOLO run (samples.parquet) and teacher-force every CoT: the prompt is
the junior's chat prefix for the same problem, the CoT is fed as the generated token ids (never
re-tokenized when the two tokenizers have the same vocabulary). Per token t of a CoT x (the final
EOS token left out, as the paper scores the decoded text; LensOptions(include_eos=True) keeps it),
with log-probs at temperature 1 on the raw logits, sliced to the tokenizer vocabulary:

    junior NLL      -log p_j(x_t | x_<t)                              (legibility; lower = more legible)
    kl_exact        KL(p_s || p_j) = sum_v p_s(v) [log p_s(v) - log p_j(v)]   (full vocabulary; HF engines)
    kl_reverse      KL(p_j || p_s)                                    (HF engines)
    kl_k1           log p_s(x_t) - log p_j(x_t)                       (Monte Carlo, from token log-probs)
    kl_k3           (r - 1) - log r,  r = p_j(x_t) / p_s(x_t)         (Monte Carlo, >= 0)

all in nats/token. A sample's value is the mean over its tokens; a problem's the mean over its
samples; a benchmark's the mean over its problems; the macro the mean over benchmark groups.
k1 and k3 are unbiased for the exact KL only when x_t ~ p_s at temperature 1: on CoTs decoded at
the paper's T=0.7/top-p/top-k they estimate E_q[log p_s/p_j] under the decoding distribution q.

Teacher forcing is the engines' own (engines/base.py: `score`, and `exact_kl` where
`full_distributions`); this module never looks at a backend. On HF (engines/hf_scoring.py) exact
KL is computed in blocks of `chunk` positions: per block both models' fp32 logits [chunk, V] plus
one work buffer are alive, so the working set is 3 * chunk * V * 4 bytes whatever the CoT length
(chunk 256, V = 151,936: 445 MiB, measured 449 MiB on CPU; see `hf_scoring.kl_peak_bytes`).

    from tandem_eval.score.lens import legibility, drift, summarize, LensOptions
    per_sample = legibility(samples, junior_engine, senior_tok=tok)       # one row per sample
    summary = summarize(per_sample, ["junior_nll_mean"], ["nll_bins"])     # CIs, with/without truncated

Outputs are keyed by the junior that read the CoTs, so one solo run can be scored by several
juniors without overwriting: RUN/lens/<junior label>/{legibility,drift}.parquet, summaries in
RUN/metrics.json under "lens" -> <junior label> -> "legibility" / "drift". Where those tables live
in a run folder (labels, `lens_file`, the older one-junior layout) is the run folder's side:
tandem_eval/run/lens_layout.py, which the read side (runs, compare, report) imports instead of this module.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..metrics.registry import DRIFT_ESTIMATORS
from ..metrics.stats import scoped_cis
from ..run.lens_layout import LensError
from ..schemas import ALPHA, BOOT_SEED, N_BOOT, PROBLEM_KEY, to_jsonable

KEYS = ["benchmark", "group", "problem_id", "sample_idx"]
LEGIBILITY_METRICS = ["junior_nll_mean", "junior_bpb"]
Progress = Callable[[int], None]  # called with the number of samples just finished


@dataclass(frozen=True)
class LensOptions:
    chunk: int = 256  # positions per logits block: bounds exact-KL memory (3 * chunk * V * 4 B)
    bins: int = 20  # relative-position bins of the per-position curves
    batch_tokens: int = 8192  # padded tokens per teacher-forced HF forward (several CoTs at once)
    allow_vocab_mismatch: bool = False  # legibility only: bits per byte over re-tokenized text
    n_boot: int = N_BOOT
    seed: int = BOOT_SEED
    alpha: float = ALPHA
    include_eos: bool = False  # score the final EOS token too (the paper scores the text without it)
    # Jinja chat templates replacing the tokenizers' own: the senior's is the one its solo run was
    # rendered with (config.json), the junior's --junior-chat-template (a base junior has none)
    senior_chat_template: str | None = None
    junior_chat_template: str | None = None


# ---- tokenizers and prompts ----------------------------------------------------------------
def vocab_matches(tok_a, tok_b) -> bool:
    """Same token string -> id map (added/special tokens included): ids mean the same to both."""
    return tok_a is tok_b or tok_a.get_vocab() == tok_b.get_vocab()


def require_shared_vocab(senior_tok, junior_tok) -> None:
    """Drift's precondition: one vocabulary (KL over different vocabularies is undefined)."""
    if not vocab_matches(senior_tok, junior_tok):
        raise LensError(
            f"drift needs one shared tokenizer: KL(senior || junior) over different vocabularies is "
            f"undefined (tokenizer vocabularies: senior {len(senior_tok)} tokens, junior {len(junior_tok)}, or "
            "equal sizes with different ids); use `tandem-eval legibility --allow-vocab-mismatch` (bits per "
            "byte) instead"
        )


def _ids(x) -> list[int]:
    return [] if x is None else np.asarray(x, dtype=np.int64).tolist()


def junior_renders_prompt(senior_tok, junior_tok, opts: LensOptions = LensOptions()) -> bool:
    """False when the stored (senior's) prompt ids are exactly the junior's chat prefix: same
    vocabulary and same effective chat template (an override, else the tokenizer's own)."""
    senior = opts.senior_chat_template or senior_tok.chat_template
    junior = opts.junior_chat_template or junior_tok.chat_template
    return not (vocab_matches(senior_tok, junior_tok) and senior == junior)


def junior_prompts(samples: pd.DataFrame, senior_tok, junior_tok, opts: LensOptions = LensOptions()) -> list[list[int]]:
    """The junior's chat prefix for each sample's problem. Same vocabulary and chat template as
    the senior: the stored prompt ids are exactly that. Otherwise render the problem text (a
    `problem` column, or the benchmark reloaded by name) with the junior's template
    (opts.junior_chat_template, else its tokenizer's own)."""
    if not junior_renders_prompt(senior_tok, junior_tok, opts):
        return [_ids(p) for p in samples["prompt_ids"]]
    from ..data.prompts import prompt_ids

    texts = samples["problem"] if "problem" in samples else _problem_texts(samples)
    cache: dict[str, list[int]] = {}
    return [cache.setdefault(t, prompt_ids(junior_tok, t, chat_template=opts.junior_chat_template)) for t in texts]


def _problem_texts(samples: pd.DataFrame) -> list[str]:
    from ..data.benchmarks import load_benchmark

    texts = {}
    for bench in samples["benchmark"].unique():
        try:
            texts.update({(p.benchmark, p.problem_id): p.problem for p in load_benchmark(bench)})
        except Exception as e:  # hub down, renamed file, ...
            raise LensError(
                f"the junior's chat template differs from the senior's, so its prompt must be "
                f"rebuilt from the problem text, but benchmark {bench!r} could not be loaded ({e}); "
                "make the benchmark available offline and rerun"
            ) from None
    missing = [k for k in zip(samples.benchmark, samples.problem_id) if k not in texts]
    if missing:
        raise LensError(f"{len(missing)} samples' problems (e.g. {missing[0]}) are not in their benchmark any more")
    return [texts[k] for k in zip(samples.benchmark, samples.problem_id)]


# ---- teacher forcing: the engines' scoring methods (engines/base.py) --------------------------
def _check_pairs(prompts, conts):
    if any(len(p) == 0 for p in prompts):
        raise LensError("an empty prompt cannot be teacher-forced (the first CoT token has no context)")


def token_logprobs(
    engine,
    prompts: list[list[int]],
    conts: list[list[int]],
    opts: LensOptions = LensOptions(),
    progress: Progress | None = None,
) -> list[np.ndarray]:
    """Raw log p(cont[i] | prompt + cont[:i]) per item (float64 arrays): the engine's batched `score`."""
    _check_pairs(prompts, conts)
    res = engine.score(prompts, conts, batch_tokens=opts.batch_tokens, chunk=opts.chunk, progress=progress)
    return [np.asarray(x, dtype=np.float64) for x in res]


def exact_kl(
    senior,
    junior,
    prompts: list[list[int]],
    conts: list[list[int]],
    opts: LensOptions = LensOptions(),
    progress: Progress | None = None,
    senior_prompts: list[list[int]] | None = None,
) -> list[dict[str, np.ndarray]]:
    """Per item, per position: kl, kl_reverse, senior_lp and junior_lp of the CoT token (engines with
    full distributions). `prompts` are the junior's; `senior_prompts` (default: the same) the senior's."""
    senior_prompts = senior_prompts or prompts
    _check_pairs(prompts, conts)
    _check_pairs(senior_prompts, conts)
    kw = {"batch_tokens": opts.batch_tokens, "chunk": opts.chunk, "progress": progress}
    return senior.exact_kl(junior, senior_prompts, prompts, conts, **kw)


def _full_distributions(*engines) -> bool:
    return all(e is not None and getattr(e, "full_distributions", False) for e in engines)


# ---- per-sample tables ---------------------------------------------------------------------
def position_bins(x: np.ndarray, bins: int) -> np.ndarray:
    """Mean of x per relative-position bin: token i of n sits in bin floor((i + 0.5) / n * bins).
    CoTs shorter than `bins` leave NaN in the bins they do not reach."""
    n = len(x)
    if n == 0:
        return np.full(bins, np.nan)
    b = np.minimum(((np.arange(n) + 0.5) / n * bins).astype(int), bins - 1)
    with np.errstate(invalid="ignore"):
        return np.bincount(b, weights=x, minlength=bins) / np.bincount(b, minlength=bins)


def _base(samples: pd.DataFrame, include_eos: bool = False) -> pd.DataFrame:
    missing = [c for c in KEYS + ["token_ids", "finish_reason"] if c not in samples]
    if missing:
        raise LensError(f"samples lack columns {missing}; pass a run folder written by tandem-eval solo")
    out = samples[KEYS].copy().reset_index(drop=True)
    out["sample_idx"] = out["sample_idx"].astype(int)
    out["n_tokens"] = [len(_ids(t)) for t in samples["token_ids"]]
    out["truncated"] = (samples["finish_reason"] == "length").to_numpy()
    out["include_eos"] = include_eos
    out["n_scored_tokens"] = [len(c) for c in cot_ids(samples, include_eos)]
    if "correct" in samples:
        out["correct"] = samples["correct"].to_numpy()
    return out


def cot_ids(samples: pd.DataFrame, include_eos: bool = False) -> list[list[int]]:
    """The CoT token ids a lens scores: as generated, without the final EOS token (a sample that
    finished with finish_reason "eos") unless include_eos."""
    out = []
    for t, reason in zip(samples["token_ids"], samples["finish_reason"]):
        t = _ids(t)
        out.append(t[:-1] if reason == "eos" and t and not include_eos else t)
    return out


def _cot_text_ids(samples: pd.DataFrame, tok) -> tuple[list[str], list[list[int]]]:
    """CoT text and ids without a final EOS token (bits per byte counts the text's UTF-8 bytes)."""
    ids = cot_ids(samples, include_eos=False)
    texts = [tok.decode(t, skip_special_tokens=False, clean_up_tokenization_spaces=False) for t in ids]
    return texts, ids


def legibility(
    samples: pd.DataFrame, junior, *, senior_tok, opts: LensOptions = LensOptions(), progress: Progress | None = None
) -> pd.DataFrame:
    """Junior NLL of each senior CoT: one row per sample (nats/token, bits/byte, per-bin curve).

    Same vocabulary: the CoT ids are scored as generated, without the final EOS token unless
    opts.include_eos (junior_bpb always excludes it).
    Different vocabulary (needs opts.allow_vocab_mismatch): the CoT text without EOS is
    re-tokenized by the junior; only junior_bpb is comparable across tokenizers."""
    jtok = junior.tokenizer
    matched = vocab_matches(senior_tok, jtok)
    if not matched and not opts.allow_vocab_mismatch:
        raise LensError(
            "senior and junior tokenizers differ; pass --allow-vocab-mismatch to compare them in "
            "bits per byte of the CoT text instead of nats per shared token"
        )
    out = _base(samples, opts.include_eos)
    prompts = junior_prompts(samples, senior_tok, jtok, opts)
    texts, no_eos = _cot_text_ids(samples, senior_tok)
    conts = cot_ids(samples, opts.include_eos) if matched else [jtok.encode(t, add_special_tokens=False) for t in texts]
    lps = token_logprobs(junior, prompts, conts, opts, progress)
    nll = [-x for x in lps]
    n_bytes = np.array([len(t.encode("utf-8")) for t in texts])
    text_nats = np.array([x[: len(i)].sum() if matched else x.sum() for x, i in zip(nll, no_eos)])
    out["n_junior_tokens"] = [len(c) for c in conts]
    out["junior_nll_sum"] = [x.sum() for x in nll]
    out["junior_nll_mean"] = [x.mean() if len(x) else np.nan for x in nll]
    out["n_bytes"] = n_bytes
    out["junior_bpb"] = np.where(n_bytes > 0, text_nats / math.log(2) / np.maximum(n_bytes, 1), np.nan)
    out["vocab_match"] = matched
    out["nll_bins"] = [position_bins(x, opts.bins) for x in nll]
    out["junior_logprobs"] = [x.astype(np.float32) for x in lps]
    return out


def drift(
    samples: pd.DataFrame,
    junior,
    *,
    senior=None,
    senior_tok=None,
    opts: LensOptions = LensOptions(),
    progress: Progress | None = None,
) -> pd.DataFrame:
    """KL drift of each senior CoT: one row per sample (nats/token, per-bin curves).

    `senior` and `junior` engines with full distributions (HF): exact forward and reverse KL over the
    vocabulary, plus k1/k3 from the same forwards (the senior reads its own stored prompt, the junior
    its chat prefix). Otherwise (vLLM): k1/k3 only, from the senior's stored generation log-probs
    (`logprobs` column; re-scored with `senior` when given and the column is missing) and the
    junior's teacher-forced log-probs; kl_exact and kl_reverse are NaN. `senior_tok` (default: the
    senior engine's) is checked against the junior's: drift refuses different vocabularies."""
    jtok = junior.tokenizer
    stok = senior_tok or (senior.tokenizer if senior is not None else None)
    if stok is None:
        raise LensError("drift needs the senior's tokenizer (pass senior or senior_tok) to check the vocabularies")
    require_shared_vocab(stok, jtok)
    out = _base(samples, opts.include_eos)
    conts = cot_ids(samples, opts.include_eos)
    prompts = junior_prompts(samples, stok, jtok, opts)
    if _full_distributions(senior, junior):
        res = exact_kl(senior, junior, prompts, conts, opts, progress, [_ids(p) for p in samples["prompt_ids"]])
        kl, rev = [r["kl"] for r in res], [r["kl_reverse"] for r in res]
        lps, lpj = [r["senior_lp"] for r in res], [r["junior_lp"] for r in res]
        out["method"] = "exact"
    else:
        lps = _stored_logprobs(samples, conts, senior, opts)
        lpj = token_logprobs(junior, prompts, conts, opts, progress)
        kl = rev = [np.full(len(c), np.nan) for c in conts]
        out["method"] = "monte-carlo"
    terms = [{"senior_lp": s, "junior_lp": j, "kl": f, "kl_reverse": r} for s, j, f, r in zip(lps, lpj, kl, rev)]
    mean = lambda xs: [x.mean() if len(x) else np.nan for x in xs]  # noqa: E731
    for name, estimator in DRIFT_ESTIMATORS.items():  # read now, so an estimator registered later counts
        out[name] = mean([estimator.per_token(t) for t in terms])
    k1 = [DRIFT_ESTIMATORS["kl_k1"].per_token(t) for t in terms]  # the per-position k1 curve
    out["senior_nll_mean"] = [-m for m in mean(lps)]
    out["junior_nll_mean"] = [-m for m in mean(lpj)]
    out["kl_bins"] = [position_bins(x, opts.bins) for x in kl]
    out["k1_bins"] = [position_bins(x, opts.bins) for x in k1]
    out["kl_tokens"] = [x.astype(np.float32) for x in kl]
    out["k1_tokens"] = [x.astype(np.float32) for x in k1]
    return out


def _stored_logprobs(samples, conts, senior, opts) -> list[np.ndarray]:
    stored = samples["logprobs"] if "logprobs" in samples else [None] * len(samples)
    lps = [np.asarray(s, dtype=np.float64) if isinstance(s, (list, tuple, np.ndarray)) else None for s in stored]
    # stored log-probs cover every generated token; the scored CoT may leave out the final EOS
    lps = [x[: len(c)] if x is not None and len(x) >= len(c) else None for x, c in zip(lps, conts)]
    if all(x is not None for x in lps):
        return lps  # type: ignore[return-value]
    if senior is None:
        raise LensError(
            "the samples have no per-token senior log-probs (`logprobs` column); use --engine hf (exact "
            "KL re-scores the senior), or regenerate the solo run"
        )
    return token_logprobs(senior, [_ids(p) for p in samples["prompt_ids"]], conts, opts)


# ---- summaries -----------------------------------------------------------------------------
def per_problem(per_sample: pd.DataFrame, column: str) -> pd.DataFrame:
    """Mean of `column` over each problem's samples: index (benchmark, problem_id); columns value, group."""
    g = per_sample.groupby(PROBLEM_KEY, sort=True)
    return pd.DataFrame({"value": g[column].mean(), "group": g["group"].first()})


def _ci_entry(ci, n_problems: int, n_samples: int) -> dict:
    if ci is None or n_problems == 0:
        return {"estimate": None, "n_problems": 0, "n_samples": n_samples}
    return {
        "estimate": ci.estimate,
        "low": ci.low,
        "high": ci.high,
        "se": ci.se,
        "n_problems": int(n_problems),
        "n_samples": n_samples,
    }


def _levels(per_sample: pd.DataFrame, column: str, opts: LensOptions, all_groups: list[str]) -> dict:
    pp = per_problem(per_sample, column) if len(per_sample) else pd.DataFrame(columns=["value", "group"])
    n_samples = lambda m: int(per_sample.loc[m, column].notna().sum())  # noqa: E731
    cis = {}
    if len(pp.dropna()):  # stats.scoped_cis: the one CI builder per benchmark / group / macro
        flat = pp.reset_index()
        cis = scoped_cis(
            flat, "value", levels=("benchmark", "group"), n_boot=opts.n_boot, seed=opts.seed, alpha=opts.alpha
        )
    out: dict[str, dict] = {"per_benchmark": {}, "per_group": {}}
    for level, col in (("per_benchmark", "benchmark"), ("per_group", "group")):
        for name in sorted(per_sample[col].unique()):
            sel = (pp.index.get_level_values(0) == name) if col == "benchmark" else (pp["group"] == name).to_numpy()
            n = int(pp["value"][sel].notna().sum())
            out[level][name] = _ci_entry(cis.get(col, {}).get(name), n, n_samples(per_sample[col] == name))
    present = set(pp.dropna()["group"])
    if present and present == set(all_groups):
        out["macro"] = _ci_entry(cis.get("macro"), int(pp["value"].notna().sum()), n_samples(slice(None)))
    else:  # a group without any value makes the macro undefined, not silently re-weighted
        out["macro"] = {"estimate": None, "missing_groups": sorted(set(all_groups) - present)}
    return out


def sample_mean_curves(per_sample: pd.DataFrame, column: str) -> dict:
    """Per-position curves of a bins column: per group the mean over samples of each sample's bin
    means (every CoT weighs the same), the macro the mean over groups. metrics.json's "curves";
    the report's figure pools tokens instead (report.figures.token_pooled_curve)."""
    with warnings.catch_warnings():  # an all-NaN bin (every CoT shorter than `bins`) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        per_group = {
            g: np.nanmean(np.stack(rows[column].to_list()), axis=0)
            for g, rows in per_sample.groupby("group", sort=True)
        }
        macro = np.nanmean(np.stack(list(per_group.values())), axis=0) if per_group else None
    return {"per_group": per_group, "macro": macro}


def summarize(
    per_sample: pd.DataFrame,
    columns: Sequence[str],
    curve_columns: Sequence[str] = (),
    opts: LensOptions = LensOptions(),
    extra: dict | None = None,
) -> dict:
    """metrics.json entry: for each column, CIs per benchmark / group / macro over all samples and
    over non-truncated ones; per-position curves (all samples); truncation counts. Strict JSON."""
    curve_columns = [curve_columns] if isinstance(curve_columns, str) else curve_columns
    groups = sorted(per_sample["group"].unique())
    clean = per_sample[~per_sample["truncated"].astype(bool)]
    out = {
        "unit": "nats/token",
        "n_samples": len(per_sample),
        "n_truncated": int(per_sample["truncated"].sum()),
        "n_problems": int(per_sample.groupby(PROBLEM_KEY).ngroups),
        "bins": None,
        "n_boot": opts.n_boot,
        "alpha": opts.alpha,
        "seed": opts.seed,
        **(extra or {}),
    }
    for c in columns:
        if per_sample[c].notna().any():
            out[c] = {"all": _levels(per_sample, c, opts, groups), "no_truncated": _levels(clean, c, opts, groups)}
    curves = {c: sample_mean_curves(per_sample, c) for c in curve_columns if c in per_sample}
    if curves:
        out["bins"], out["curves"] = opts.bins, curves
    return to_jsonable(_listify(out))


def _listify(obj):
    if isinstance(obj, dict):
        return {k: _listify(v) for k, v in obj.items()}
    return obj.tolist() if isinstance(obj, np.ndarray) else obj
