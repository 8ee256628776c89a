"""The lm-evaluation-harness model `tandem`: any lm-eval task through tandem-eval's co-generation loop.

lm-eval 0.4.13 has no plugin entry points: a model exists once its module is imported. Importing this
module registers `tandem` (lm-eval's built-in models stay registered, lazily, as before):

    tandem-eval lm-eval --model tandem --model_args senior=CKPT,junior=JR,schedule=paragraph --tasks gsm8k
    # in Python
    import lm_eval, tandem_eval.integrations.lm_eval_model  # noqa: F401  (registers "tandem")
    lm_eval.simple_evaluate(model="tandem", model_args="senior=CKPT,schedule=solo", tasks=["gsm8k"])

model_args (comma-separated key=value): senior (path or toy:NAME, required), junior (default: the one in the
senior's tandem_meta.json; needed by every schedule but solo), schedule (solo | paragraph | word[:P[:K]] | sentence
| chunk:N | takeover:N | junior-solo; default paragraph), engine (hf | vllm), dtype (auto: bf16 on a GPU, fp32 on
CPU), seed (trace seeds derive from it, the task name, the doc id and the repeat), max_length (prompt + generation;
default the senior's max_position_embeddings), max_gen_toks (when the task sets none; 256), tensor_parallel_size,
score_with (senior | junior: who scores loglikelihood requests), allow_vocab_mismatch, add_bos_token, chat_template
(a Jinja file replacing the senior tokenizer's template for `--apply_chat_template`; a base senior has none). The
junior reads the prompt as lm-eval rendered it (with the senior's template), so there is no junior template
argument. The checkpoints, tokenizers and template are checked before any weights load (`models.check_models`, as
`tandem-eval solo` does).

Generation (`generate_until`): requests are grouped by their generation kwargs; each group runs as one
`cogenerate` pool (greedy when do_sample is false; else temperature/top_p/top_k, unset = no filtering). The loop
has no text-level stop, so a trace runs to EOS or max_gen_toks and is cut at the first `until` string: every
token depends only on the tokens before it and the trace seed, so the kept text equals what an early stop
would give (tokens past the stop cost compute, not results).

Per-sample tandem info: after generation each request's `arguments` tuple gains a third element
`{"tandem": [one dict per repeat]}` with the kept `token_ids`, `author_mask` (1 = senior), `n_handoffs`
(author switches within the kept tokens), `senior_fraction`, `n_tokens`, `finish_reason` and `seed`.
lm-eval logs every request's arguments, so `--log_samples` writes it as
`arguments.gen_args_0.arg_2.tandem` (read it with `lm_eval_tax.read_samples`). With `--use_cache` lm-eval
hashes the arguments after the call, so cached entries never match; run tandem without it.

Loglikelihood requests are teacher-forced by the `score_with` engine (the engine protocol's `score`); is_greedy
comes from greedy decoding on that engine (every backend). A junior served through a
different vocabulary cannot score (a one-line error says so).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import lm_eval.models  # noqa: F401  (registers the built-in models first; see lm_eval.api.registry.get_model)
import numpy as np
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from tqdm import tqdm

from ..config import EvalConfig, ModelSpec, Sampling
from ..data.prompts import PromptError
from ..devices import resolve_dtype, usable_device
from ..engines import backend, load_engine, unavailable
from ..engines.base import Request, generate
from ..engines.bridge import RetokenizingEngine
from ..generate.execute import close_engines, open_engines
from ..generate.schedules import make_schedule, needs_junior
from ..generate.tandem import TraceSpec, budget, cogenerate, trace_seed
from ..models import check_models, default_junior, resolve_model
from ..paths import read_chat_template
from ..schemas import ConfigError

log = logging.getLogger(__name__)

INFO_KEY = "tandem"  # the key of the dict appended to each request's arguments
IGNORED_ARGS = ("max_batch_size",)  # lm-eval's simple_evaluate passes it to every model


@dataclass(frozen=True)
class TandemOptions:
    """The model_args of `--model tandem`, typed and checked before any model loads (see the module
    docstring for each one's meaning)."""

    senior: str | None = None
    junior: str | None = None
    schedule: str = "paragraph"
    engine: str = "hf"
    dtype: str = "auto"  # bf16 on a GPU, fp32 on CPU (tandem_eval.devices); the resolved one is in the config
    seed: int = 0
    max_length: int | None = None  # default: the senior's max_position_embeddings
    max_gen_toks: int = 256
    tensor_parallel_size: int = 1
    score_with: str = "senior"
    allow_vocab_mismatch: bool = False
    add_bos_token: bool = False
    chat_template: str | None = None
    batch_size: int = 32
    device: str | None = None

    @classmethod
    def from_model_args(cls, args: dict) -> TandemOptions:
        """The options from lm-eval's keywords (numbers and booleans as values or text); an unknown
        key or a value of the wrong kind is refused in one line."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(k for k in args if k not in names and k not in IGNORED_ARGS)
        if unknown:
            raise ConfigError(f"unknown model_args {unknown} for --model tandem; valid: {', '.join(names[:-2])}")
        o = {k: v for k, v in args.items() if k in names}
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for name, minimum in {"seed": None, "max_length": 2, "max_gen_toks": 1, "tensor_parallel_size": 1}.items():
            if name in o and not (name == "max_length" and o[name] in (None, "")):  # unset max_length: the default
                o[name] = _int_arg(name, o[name], minimum)
        if "batch_size" in o:  # lm-eval passes its --batch_size (None when unset)
            o["batch_size"] = (
                defaults["batch_size"] if o["batch_size"] in (None, "") else _int_arg("batch_size", o["batch_size"], 1)
            )
        if o.get("max_length") == "":
            o["max_length"] = None
        for name in ("allow_vocab_mismatch", "add_bos_token"):
            if name in o:
                o[name] = _bool_arg(name, o[name])
        if "schedule" in o:
            o["schedule"] = str(o["schedule"])
        return cls(**o)


@register_model("tandem")
class TandemLM(TemplateLM):
    """lm-eval's LM interface on a senior (and junior) pair of tandem-eval engines."""

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> TandemLM:
        """lm-eval's --model_args string; see create_from_arg_obj."""
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> TandemLM:
        """--model_args first; lm-eval's own --device, --batch_size and --max_batch_size fill in only what
        model_args leaves unset. lm-eval passes both to the constructor, so `device=cpu` in model_args
        beside `--device cuda` (the flag every lm-eval user passes) raised "got multiple values for
        keyword argument 'device'"."""
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None and k not in arg_dict}
        for k, v in (additional_config or {}).items():
            if v is not None and k in arg_dict and str(v) != str(arg_dict[k]) and k not in IGNORED_ARGS:
                log.info("--model_args %s=%s is used; lm-eval's --%s %s is not", k, arg_dict[k], k, v)
        return cls(**arg_dict, **extra)

    def __init__(self, **model_args):
        """`model_args`: TandemOptions' fields by name (lm-eval passes them as keywords, numbers and
        booleans often as text); lm-eval's own extras (IGNORED_ARGS) are dropped."""
        super().__init__()
        opts = TandemOptions.from_model_args(model_args)
        if reason := unavailable(opts.engine):
            raise ConfigError(reason)
        if backend(opts.engine).remote:  # before a URL is read as a checkpoint folder
            raise ConfigError(
                f"engine={opts.engine}: --model tandem loads its models in this process; measure served models "
                "with `tandem-eval solo|handoff|legibility|drift --engine served` "
                "(docs/usage.md#served-models---engine-served)"
            )
        senior_path, junior, wants_junior = _pair(opts.senior, opts.junior, opts.schedule, opts.score_with)
        self.options = opts
        self.schedule_name, self.seed, self.score_with = opts.schedule, opts.seed, opts.score_with
        self.max_length = opts.max_length or _max_positions(senior_path)
        self.default_max_gen_toks, self.add_bos_token = opts.max_gen_toks, opts.add_bos_token
        self.batch_size = opts.batch_size
        template = read_chat_template(Path(opts.chat_template), "chat_template=") if opts.chat_template else None
        device = usable_device(opts.device) if backend(opts.engine).takes_device else None
        dtype = resolve_dtype(opts.dtype, device)
        self.cfg = EvalConfig(
            senior=ModelSpec(str(opts.senior), dtype),
            junior=ModelSpec(str(junior), dtype) if junior else None,
            mode="solo" if self.schedule_name == "solo" else "handoff",
            schedule=self.schedule_name,
            engine=opts.engine,
            sampling=Sampling(max_context=self.max_length),
            batch_size=self.batch_size,
            tensor_parallel_size=opts.tensor_parallel_size,
            allow_vocab_mismatch=opts.allow_vocab_mismatch,
            chat_template=template,
        )
        # the up-front checks of `tandem-eval solo`, before any weights load
        check_models(self.cfg, junior_needed=wants_junior, templates=False, option="chat_template=")
        engine_kw = {"device": device} if device else {}
        self.engines = open_engines(self.cfg, **engine_kw)
        if opts.score_with == "junior" and "junior" not in self.engines:  # solo generation, junior scoring
            self.engines["junior"] = load_engine(
                opts.engine, resolve_model(str(junior)), self.cfg.sampling, dtype=dtype, max_batch=self.batch_size
            )
        self.tokenizer = self.engines["senior"].tokenizer
        self.schedule = make_schedule(self.schedule_name, self.tokenizer)
        self._device = opts.device

    # ---- lm-eval's small interface ---------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def tokenizer_name(self) -> str:
        return str(self.tokenizer.name_or_path).replace("/", "__")

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        special = self.add_bos_token if add_special_tokens is None else add_special_tokens
        return self.tokenizer.encode(string, add_special_tokens=special)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not (self.cfg.chat_template or self.tokenizer.chat_template):
            raise PromptError(
                f"--apply_chat_template: the senior {self.cfg.senior.path} has no chat template; add "
                "chat_template=FILE to --model_args"
            )
        # enable_thinking=False as in tandem-eval's own prompts; templates without the flag ignore it
        return self.tokenizer.apply_chat_template(
            chat_history,
            chat_template=self.cfg.chat_template,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
            enable_thinking=False,
        )

    def close(self) -> None:
        close_engines(self.engines)

    # ---- generation ----------------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        if not requests:
            return []
        # lm-eval passes an Instance `repeats` times in a row; the repeat index feeds the trace seed.
        seen: Counter = Counter()
        repeat = []
        for req in requests:
            repeat.append(seen[id(req)])
            seen[id(req)] += 1
        groups: dict[str, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            groups[json.dumps(req.args[1], sort_keys=True, default=str)].append(i)
        texts: list[str] = [""] * len(requests)
        infos: dict[int, dict] = {}
        bar = tqdm(total=len(requests), desc="tandem generate_until", disable=disable_tqdm)
        for idx in groups.values():
            for i, text, info in self._generate_group(requests, idx, repeat):
                texts[i], infos[i] = text, info
                bar.update(1)
        bar.close()
        per_request: dict[int, list] = defaultdict(list)
        for i, req in enumerate(requests):
            per_request[id(req)].append(infos[i])
        for req in {id(r): r for r in requests}.values():  # attach once per Instance, after every group ran
            req.arguments = (*req.arguments[:2], {INFO_KEY: per_request[id(req)]})
        return texts

    def _generate_group(self, requests, idx: list[int], repeat: list[int]):
        """Yield (request index, kept text, tandem info) for requests sharing one gen_kwargs dict."""
        kwargs = normalize_gen_kwargs(requests[idx[0]].args[1], self.default_max_gen_toks)
        eos = self.tokenizer.decode([self.eot_token_id], skip_special_tokens=False)
        until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
        max_gen = int(kwargs.pop("max_gen_toks"))
        if max_gen >= self.max_length:
            raise ConfigError(f"max_gen_toks {max_gen} must be < max_length {self.max_length}; raise max_length")
        self._set_sampling(_sampling(kwargs, max_gen, self.max_length))
        specs: list[TraceSpec] = []
        seeds: dict[Hashable, int] = {}  # by request index: the traces' keys
        for i in idx:
            req = requests[i]
            prompt = tuple(self.tok_encode(req.args[0])[-(self.max_length - max_gen) :])
            key = f"{req.task_name}/{req.doc_id}/{req.idx}" if req.task_name is not None else f"request/{i}"
            seeds[i] = trace_seed(self.seed, key, repeat[i])
            specs.append(TraceSpec(i, prompt, seeds[i], budget(len(prompt), max_gen, self.max_length)))
        junior = self.engines.get("junior") if needs_junior(self.schedule_name) else None
        if isinstance(junior, RetokenizingEngine):
            for spec in specs:
                ids = junior.inner.tokenizer.encode(requests[spec.key].args[0], add_special_tokens=False)
                junior.register(spec.key, ids, len(spec.prompt_ids))
        pool = self.batch_size * (2 if junior is not None else 1)
        for trace in cogenerate(specs, self.engines["senior"], junior, self.schedule, pool_size=pool):
            text, info = self._cut(trace, until)
            yield trace.key, text, {**info, "seed": seeds[trace.key]}

    def _cut(self, trace, until: list[str]) -> tuple[str, dict]:
        """The text up to the first stop string, and the author info of the tokens that wrote it."""
        full = self.tokenizer.decode(trace.token_ids, skip_special_tokens=True)
        text = postprocess_generated_text(full, until, None)
        n = len(trace.token_ids) if text == full else _tokens_covering(self.tokenizer, trace.token_ids, len(text))
        mask = np.asarray(trace.author_mask[:n], dtype=np.int8)
        return text, {
            "schedule": self.schedule_name,
            "token_ids": list(trace.token_ids[:n]),
            "author_mask": mask.tolist(),
            "n_tokens": int(n),
            "n_senior_tokens": int(mask.sum()),
            "senior_fraction": float(mask.mean()) if n else None,
            "n_handoffs": int(np.count_nonzero(np.diff(mask))) if n else 0,
            "finish_reason": trace.finish_reason if text == full else "stop",
        }

    def _set_sampling(self, sampling: Sampling) -> None:
        # Engines read `sampling` when they sample (hf) or submit (vllm); one gen_kwargs group runs at a time.
        for engine in self.engines.values():
            getattr(engine, "inner", engine).sampling = sampling

    # ---- scoring -------------------------------------------------------------------------------------
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        out = []
        for _, context, continuation in tqdm(requests, desc="tandem loglikelihood", disable=disable_tqdm):
            ids = (list(context) + list(continuation))[-self.max_length :]  # left-truncate like lm-eval's hf
            n_ctx = max(1, len(ids) - len(continuation))
            out.append(self._score(ids[:n_ctx], ids[n_ctx:]))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        out = []
        for (string,) in tqdm([r.args for r in requests], desc="tandem rolling", disable=disable_tqdm):
            windows = lm_utils.get_rolling_token_windows(
                self.tok_encode(string), self.prefix_token_id, self.max_length - 1, context_len=1
            )
            out.append(sum(self._score(*lm_utils.make_disjoint_window(w))[0] for w in windows))
        return out

    def _score(self, context: list[int], continuation: list[int]) -> tuple[float, bool]:
        """lm-eval's (log-prob, is_greedy) of `continuation` after `context`, through the engine protocol:
        the teacher-forced `score`, and greedy decoding for is_greedy (the protocol exposes no argmax)."""
        engine = self.engines[self.score_with]
        try:
            [lps] = engine.score([context], [continuation])
        except NotImplementedError as e:
            raise NotImplementedError(
                f"loglikelihood requests need teacher-forced scores from the {self.score_with}'s engine "
                f"({engine.name}): {e}; use score_with=senior or a junior with the senior's tokenizer"
            ) from None
        return float(np.sum(lps)), self._is_greedy(engine, context, continuation)

    def _is_greedy(self, engine, context: list[int], continuation: list[int]) -> bool:
        """Whether greedy decoding after `context` writes `continuation`: each token is the argmax given
        the true prefix. Greedy segments from the engine (raw logits at temperature 0 are argmax on every
        backend); a segment that ends at an EOS inside the continuation restarts after it."""
        target = getattr(engine, "inner", engine)  # the engine that reads `sampling` (see _set_sampling)
        saved = target.sampling
        target.sampling = Sampling(0.0, 1.0, 0, len(continuation), self.max_length)
        try:
            done = 0
            while done < len(continuation):
                prefix = list(context) + list(continuation[:done])
                [got] = generate(engine, [Request("is_greedy", prefix, len(continuation) - done)])
                if not got.token_ids or got.token_ids != list(continuation[done : done + len(got.token_ids)]):
                    return False
                done += len(got.token_ids)
            return True
        finally:
            target.sampling = saved


def _bool_arg(name: str, value) -> bool:
    """A boolean model_arg: True/False, or the text true/false/1/0 (any case); anything else is refused
    (bool("no") would be True)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ConfigError(f"model_args {name}={value}: expected true, false, 1 or 0")


def _int_arg(name: str, value, minimum: int | None = None) -> int:
    """An integer model_arg (lm-eval passes numbers or text), at least `minimum`; else one line."""
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"model_args {name}={value}: expected an integer") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"model_args {name}={value}: must be >= {minimum}")
    return number


def _pair(senior, junior, schedule: str, score_with: str) -> tuple:
    """The model_args' senior checkpoint folder, the junior (default: the senior's recorded one when the
    schedule or score_with=junior needs one) and whether one is needed."""
    if not senior:
        raise ConfigError("--model tandem needs a senior: --model_args senior=PATH[,junior=PATH,schedule=...]")
    if score_with not in ("senior", "junior"):
        raise ConfigError(f"score_with must be senior or junior, got {score_with!r}")
    senior_path = resolve_model(str(senior))
    wants_junior = needs_junior(schedule) or score_with == "junior"
    if wants_junior and not junior:
        fix = f"schedule {schedule!r} (or score_with=junior) needs a junior: add junior=PATH to --model_args"
        junior = default_junior(senior_path, senior, fix, option="junior", error=ConfigError)
    return senior_path, junior, wants_junior


def _sampling(kwargs: dict, max_new_tokens: int, max_context: int) -> Sampling:
    """tandem-eval Sampling from lm-eval's normalized gen kwargs (greedy unless do_sample)."""
    ignored = sorted(set(kwargs) - {"do_sample", "temperature", "top_p", "top_k"})
    if ignored:
        log.warning("tandem ignores generation kwargs %s", ignored)
    if not kwargs.get("do_sample") or float(kwargs.get("temperature", 0.0)) == 0.0:
        return Sampling(0.0, 1.0, 0, max_new_tokens, max_context)
    top_k = kwargs.get("top_k")
    return Sampling(
        float(kwargs["temperature"]),
        float(kwargs.get("top_p") or 1.0),
        int(top_k) if top_k is not None else 0,
        max_new_tokens,
        max_context,
    )


def _tokens_covering(tokenizer, token_ids: list[int], n_chars: int) -> int:
    """The fewest leading tokens whose decoded text has at least n_chars characters (binary search)."""
    lo, hi = 0, len(token_ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tokenizer.decode(token_ids[:mid], skip_special_tokens=True)) >= n_chars:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _max_positions(path: Path) -> int:
    from transformers import AutoConfig

    return int(getattr(AutoConfig.from_pretrained(str(path)), "max_position_embeddings", None) or 2048)
