"""Trace viewer: one self-contained HTML page (no network, no external files) showing co-generated
traces token by token, each token's background colored by its author (blue = senior, orange =
junior) and shaded by the junior's surprise −log p (darker = more surprising): on solo CoTs from
the per-token junior log-probs the legibility lens wrote (RUN/lens/<junior>/legibility.parquet,
column `junior_logprobs`), on handoff traces from the junior's own log-probs of the tokens it wrote.
A summary header gives accuracy, grade status and truncation per run; the traces of one problem and
sample index sit in columns (solo | handoff ...); handoff points are marked and the junior's
surprise right after each handoff to the junior is outlined; each trace names its junior.
Filters: benchmark, problem, correct, mode.

    tandem-eval view runs/tandem/solo                    # -> runs/tandem/solo/view.html
    tandem-eval view runs/tandem --out page.html         # every run folder below runs/tandem
    python -c "from tandem_eval.report.view import write_page; write_page('runs/x/solo')"

Token boundaries need the tokenizer (the senior's checkpoint folder, from config.json, or
--tokenizer PATH; a path recorded on another machine is found in this install, run_tokenizer); only
its vocabulary is read (tokenizer.json, without transformers or torch), never a model. Without one
the page shows each trace's plain text. Byte-level BPE pieces are decoded to bytes and joined with an incremental
UTF-8 decoder, so a character split over two tokens is shown once, on the token that completes it.
"""

from __future__ import annotations

import codecs
import html
import json
import math
import re
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from tandem_eval.files import atomic_write_text, check_write_target, make_dirs, missing_dirs, remove_empty
from tandem_eval.paths import not_writable
from tandem_eval.report.collect import Collection, check_pairs
from tandem_eval.run.runs import ReportError, Run, run_tokenizer, runs_in
from tandem_eval.schemas import PROBLEM_KEY, SAMPLE_KEY

MAX_TRACES = 1000
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")  # SentencePiece byte fallback


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte <-> printable-character table used by every byte-level BPE tokenizer."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}


def token_surfaces(pieces: list[str | None]) -> list[str]:
    """Display text of each token from its vocabulary piece (byte-level BPE, SentencePiece, or
    special tokens), joined so that the surfaces concatenate to the decoded text."""
    # bytes that are no valid UTF-8 (a model may emit any byte token) show as U+FFFD, never an error
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = []
    for piece in pieces:
        piece = piece or ""
        m = _BYTE_PIECE.match(piece)
        if m:
            out.append(dec.decode(bytes([int(m.group(1), 16)])))
        elif piece and all(ch in BYTE_DECODER for ch in piece):
            out.append(dec.decode(bytes(BYTE_DECODER[ch] for ch in piece)))
        else:  # a special token or a SentencePiece piece: flush pending bytes, then the piece itself
            out.append(dec.decode(b"", final=True) + piece.replace("▁", " "))
    return out


def display_surfaces(tokenizer, token_ids) -> list[str]:
    """token_surfaces of a trace, with special tokens (`<|im_end|>`, EOS, ...) shown as nothing: they
    end turns, they are not text (decode with skip_special_tokens, as the stored `text`, drops them too)."""
    ids = [int(t) for t in token_ids]
    special = set(getattr(tokenizer, "all_special_ids", None) or [])
    surfaces = token_surfaces(tokenizer.convert_ids_to_tokens(ids))
    return ["" if t in special else s for t, s in zip(ids, surfaces)]


POST_HANDOFF = 5  # junior tokens right after a handoff whose surprise is outlined and summarised


def _surprise(run: Run) -> dict:
    """(benchmark, problem_id, sample_idx) -> per-token junior −log p from the run's legibility
    output: the lens's `junior_logprobs` (negated), else a per-token NLL array column (not the
    per-bin `*_bins` curves, whose length is the number of bins)."""
    columns = run.side_columns("legibility")
    column: str | None
    if columns.get("junior_logprobs"):
        column, sign = "junior_logprobs", -1.0
    else:
        column = next((c for c in sorted(columns) if columns[c] and "nll" in c and not c.endswith("bins")), None)
        sign = 1.0
    if column is None:
        return {}
    df = cast(pd.DataFrame, run.side_table("legibility", arrays=True))  # cast: it has columns, so it exists
    if "sample_idx" not in df.columns:
        return {}
    return {
        (b, str(p), int(i)): sign * np.asarray(a, dtype=float)
        for b, p, i, a in zip(df["benchmark"], df["problem_id"], df["sample_idx"], df[column])
        if a is not None
    }


def _rounded(values) -> list:
    return [round(float(x), 2) if x is not None and math.isfinite(float(x)) else None for x in values]


def _answer(value) -> str:
    """The extracted answer as text; "none extracted" for a missing one (never "nan"/"None")."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value) in ("", "nan", "None"):
        return "none extracted"
    return str(value)


def _junior_of(run: Run) -> str:
    """The junior a trace involves: the handoff's junior, or the one whose lens output shades a solo run."""
    from tandem_eval.run.lens_layout import junior_label

    path = (run.config.get("junior") or {}).get("path")
    if run.mode == "handoff" and path:
        return junior_label(path)
    return run.junior_name() or "none (no legibility output)"


def run_summary(run: Run) -> dict:
    """Header numbers of one run: traces, accuracy, grade status counts, truncation rate (all samples)."""
    s = run.samples()
    n = len(s)
    status = s["grade_status"].value_counts().sort_index() if "grade_status" in s else pd.Series(dtype=int)
    return {
        "run": run.label,
        "m": _mode(run),
        "n": n,
        "acc": round(100.0 * float(s["correct"].mean()), 1) if n else None,
        "trunc": round(100.0 * float((s["finish_reason"] == "length").mean()), 1) if n else None,
        "status": {str(k): int(v) for k, v in status.items()},
        "junior": _junior_of(run),
    }


def _mode(run: Run) -> str:
    return run.mode if run.mode == "solo" else f"handoff · {run.schedule}"


def trace_segments(token_ids, author_mask, tokenizer) -> list[tuple[str, str]]:
    """A trace as (author, text) segments, author "senior" or "junior" (for notebooks and printing)."""
    surfaces = display_surfaces(tokenizer, token_ids)
    segments: list[tuple[str, str]] = []
    for text, a in zip(surfaces, author_mask):
        who = "senior" if int(a) else "junior"
        if segments and segments[-1][0] == who:
            segments[-1] = (who, segments[-1][1] + text)
        else:
            segments.append((who, text))
    return segments


def _select(samples: pd.DataFrame, max_traces: int) -> pd.DataFrame:
    """All traces, or every sample of evenly spaced problems so that at most max_traces remain."""
    if len(samples) <= max_traces:
        return samples
    keys = samples[PROBLEM_KEY].drop_duplicates().sort_values(PROBLEM_KEY)
    per_problem = len(samples) / len(keys)
    # whole problems, so a kept problem keeps all its samples; evenly spaced over the sorted keys, so they span
    # the benchmarks instead of being the first few problems
    n_keep = max(1, int(max_traces // per_problem))
    pick = keys.iloc[np.linspace(0, len(keys) - 1, n_keep).round().astype(int)]
    return samples.merge(pick, on=PROBLEM_KEY)


def _trace_rows(run: Run, tokenizer, max_traces: int) -> tuple[list[dict], int]:
    samples = run.samples().sort_values(SAMPLE_KEY, kind="stable")
    total = len(samples)
    samples = _select(samples, max_traces)
    surprise = _surprise(run)
    mode, junior = _mode(run), _junior_of(run)
    contents = run.contents()  # one problem's traces share a column only when it is the same problem
    rows = []
    for r in samples.itertuples(index=False):
        ids = [int(t) for t in (r.token_ids if r.token_ids is not None else [])]
        mask = [int(a) for a in (r.author_mask if r.author_mask is not None else [1] * len(ids))]
        row = {
            "run": run.label,
            "b": r.benchmark,
            "p": str(r.problem_id),
            "h": contents.get((r.benchmark, r.problem_id), ""),
            "i": int(r.sample_idx),
            "m": mode,
            "ok": bool(r.correct),
            "gold": str(r.gold),
            "ans": _answer(r.extracted_answer),
            "jr": junior,
            "fin": str(r.finish_reason),
            "prompt": str(r.prompt),
            "a": "".join("1" if a else "0" for a in mask),
        }
        if tokenizer is not None and len(ids) == len(mask):
            row["tok"] = display_surfaces(tokenizer, ids)
            nll = surprise.get((r.benchmark, str(r.problem_id), int(r.sample_idx)))
            own = getattr(r, "logprobs", None)
            if nll is not None and len(ids) - 1 <= len(nll) <= len(ids):  # the lens may leave out the final EOS
                row["s"], row["src"] = _rounded(nll) + [None] * (len(ids) - len(nll)), "lens"
            elif run.mode == "handoff" and own is not None and len(own) == len(ids) and "0" in row["a"]:
                # the junior's own log-probs of the tokens it wrote: its surprise where it took over
                row["s"] = _rounded(-float(lp) if not a else None for lp, a in zip(own, mask))
                row["src"] = "own"
        else:
            row["text"] = str(r.text)
        rows.append(row)
    return rows, total


def build_page(
    path: str | Path, tokenizer_path: str | Path | None = None, max_traces: int = MAX_TRACES, junior: str | None = None
) -> str:
    """The HTML page for a run folder or a folder of run folders (`junior`: whose legibility output
    shades solo runs scored by several juniors; default the only one, else the handoff's junior)."""
    if isinstance(max_traces, bool) or not isinstance(max_traces, int) or max_traces < 1:
        # 0 wrote a page of no traces; the page is for reading traces
        raise ReportError(f"--max-traces must be an integer >= 1, got {max_traces!r}")
    runs = sorted(runs_in(Path(path)), key=lambda r: (r.label, r.mode != "solo", r.schedule))
    check_pairs(runs)  # a handoff sits beside the solo run it was measured against, or not at all
    Collection(runs, []).pick_juniors(junior)
    tokenizers: dict[str, object] = {}
    traces, total, summary = [], 0, []
    for order, run in enumerate(runs):
        summary.append(run_summary(run))
        key = str(tokenizer_path or (run.config.get("senior") or {}).get("path"))
        # a senior's solo and handoff runs load its tokenizer once
        if key not in tokenizers:
            tokenizers[key] = run_tokenizer(run.config, tokenizer_path)
        # --max-traces bounds the whole page: each run gets an equal share
        rows, n = _trace_rows(run, tokenizers[key], max(1, max_traces // len(runs)))
        traces += [(r["b"], r["p"], r["h"], order, r["i"], r) for r in rows]
        total += n
    ordered = [t[-1] for t in sorted(traces, key=lambda t: t[:5])]  # one problem's runs side by side
    surprises = [x for t in ordered for x in t.get("s", []) if x is not None]
    data: dict[str, Any] = {
        "title": f"tandem-eval traces: {', '.join(sorted({r.label for r in runs}))} ({Path(path).resolve().name})",
        "traces": ordered,
        "total": total,
        "summary": summary,
        "post": POST_HANDOFF,
        # the darkest shade at the 95th percentile, so a few very surprising tokens do not pale every other one
        "scale": float(np.quantile(surprises, 0.95)) if surprises else None,
    }
    payload = embed_json(data)
    parts = {"__TITLE__": html.escape(data["title"]), "__CSS__": CSS, "__DATA__": payload, "__JS__": JS}
    # one pass, so text inside the data (a problem mentioning "__JS__", say) is never substituted
    return re.sub("__(?:TITLE|CSS|DATA|JS)__", lambda m: parts[m.group(0)], PAGE)


_JSON_TABLE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def embed_json(data) -> str:
    """JSON safe inside <script type="application/json"> in every HTML parser state: <, > and &
    (which could open `</script>`, `<!--`, `<![CDATA[` or a character reference) and the JavaScript
    line separators U+2028/2029 are written as \\uXXXX escapes, which JSON.parse turns back."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_JSON_TABLE)


def write_page(
    path: str | Path,
    out: str | Path | None = None,
    tokenizer_path: str | Path | None = None,
    max_traces: int = MAX_TRACES,
    junior: str | None = None,
) -> Path:
    target = Path(out) if out else Path(path) / "view.html"
    if target.is_dir():
        raise ReportError(f"--out {target} is a folder; pass an HTML file path, e.g. {target / 'view.html'}")
    reason = not_writable(target.parent) if Path(path).exists() else None  # a missing run: build_page says so
    if reason:
        raise ReportError(f"cannot write {target}: {reason}; pass --out FILE somewhere writable")
    page = build_page(path, tokenizer_path, max_traces, junior)  # it checks `path`
    check_write_target(target)  # never through a planted link
    created = missing_dirs(target.parent)
    make_dirs(target.parent)
    try:
        atomic_write_text(target, page, root=target.parent)  # whole or not at all (a full disk: one line)
    except BaseException:
        remove_empty(created)  # a folder made for a page that was never written
        raise
    return target


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>__CSS__</style></head>
<body>
<header><h1>__TITLE__</h1>
<table id="summary"><thead><tr><th>run</th><th>mode</th><th>junior</th><th>traces</th><th>accuracy</th>
<th>grade status</th><th>truncated</th></tr></thead><tbody></tbody></table>
<div id="legend"><span class="tok sen" style="--a:.35">senior</span> <span class="tok jun" style="--a:.35">junior</span>
<span class="ho-mark">⇄</span> handoff
<span id="surprise-legend">· shade = junior surprise −log p: <span class="tok sen" style="--a:.08">low</span><span class="tok sen"
style="--a:.85">high</span> · <span class="tok jun post" style="--a:.35">outlined</span> = the junior's first tokens
after a handoff</span></div>
<form id="filters">
<label>benchmark <select id="f-bench"></select></label>
<label>problem <select id="f-problem"></select></label>
<label>correct <select id="f-correct"><option value="">all</option><option value="1">correct</option>
<option value="0">wrong</option></select></label>
<label>mode <select id="f-mode"></select></label>
<label><input type="checkbox" id="f-shade" checked> surprise shading</label>
</form>
<div id="status"></div><div id="pager"><button id="prev" type="button">◀ prev</button>
<span id="page"></span><button id="next" type="button">next ▶</button></div>
</header>
<main id="traces"></main>
<script id="data" type="application/json">__DATA__</script>
<script>__JS__</script>
</body></html>
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#111;background:#fafafa}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:8px 16px;z-index:1}
h1{font-size:16px;margin:0 0 4px}
#summary{border-collapse:collapse;font-size:12px;margin:4px 0}
#summary td,#summary th{border-bottom:1px solid #eee;padding:1px 8px;text-align:left}
form label{margin-right:12px;font-size:13px} select{max-width:260px}
#status,#pager{font-size:12px;color:#555;display:inline-block;margin:4px 12px 0 0}
main{padding:8px 16px}
.pair{display:grid;gap:10px;align-items:start}
.trace{background:#fff;border:1px solid #ddd;border-radius:6px;margin:10px 0;padding:8px 12px;min-width:0}
.trace.wrong{border-left:4px solid #c00}.trace.right{border-left:4px solid #2a2}
.trace.empty{border-style:dashed;color:#888;font-size:12px}
.meta{font-size:12px;color:#444;margin-bottom:4px}.meta b{color:#000}
.body{font:13px/1.6 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-word}
.tok{--a:.35;border-radius:2px}
.tok.sen{background:rgba(0,114,178,var(--a))}.tok.jun{background:rgba(213,94,0,var(--a))}
.tok.post{outline:1.5px solid #000;outline-offset:-1px}
.ho-mark{color:#000;font-weight:bold;padding:0 1px}
details{font-size:12px;color:#555}
"""

JS = r"""
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const T = D.traces, PER = 10, $ = id => document.getElementById(id);
let page = 0;
document.getElementById('surprise-legend').style.display = D.scale ? '' : 'none';
const modeOf = t => t.run + ' · ' + t.m;
D.summary.forEach(r => {
  const tr = document.createElement('tr');
  const status = Object.entries(r.status).map(([k, v]) => k + ' ' + v).join(', ');
  [r.run, r.m, r.junior, String(r.n), r.acc === null ? '–' : r.acc + '%', status,
   r.trunc === null ? '–' : r.trunc + '%'].forEach(v => {
    const td = document.createElement('td'); td.textContent = v; tr.appendChild(td); });
  document.querySelector('#summary tbody').appendChild(tr);
});
function fill(sel, values, label){
  const keep = sel.value; sel.innerHTML = '';
  [['', 'all (' + values.length + ')']].concat(values.map(v => [v, label ? label(v) : v])).forEach(([v, t]) => {
    const o = document.createElement('option'); o.value = v; o.textContent = t; sel.appendChild(o); });
  if (values.includes(keep)) sel.value = keep;
}
const uniq = xs => Array.from(new Set(xs)).sort();
fill($('f-bench'), uniq(T.map(t => t.b)));
fill($('f-mode'), uniq(T.map(modeOf)));
function problems(){ fill($('f-problem'), uniq(T.filter(t => !$('f-bench').value || t.b === $('f-bench').value).map(t => t.p))); }
problems();
function selected(){
  const b = $('f-bench').value, p = $('f-problem').value, c = $('f-correct').value, m = $('f-mode').value;
  return T.filter(t => (!b || t.b === b) && (!p || t.p === p) && (!c || String(+t.ok) === c) &&
                       (!m || modeOf(t) === m));
}
function tokens(t, body){
  const shade = $('f-shade').checked && t.s && D.scale;
  const frag = document.createDocumentFragment();
  let since = -1, post = [];  // tokens since the last handoff to the junior; their surprises
  for (let i = 0; i < t.tok.length; i++){
    const sen = t.a[i] === '1';
    if (i > 0 && t.a[i] !== t.a[i - 1]){
      const mark = document.createElement('span'); mark.className = 'ho-mark';
      mark.textContent = '⇄'; mark.title = 'handoff to the ' + (sen ? 'senior' : 'junior');
      frag.appendChild(mark);
      since = sen ? -1 : 0;
    }
    const span = document.createElement('span');
    span.className = 'tok ' + (sen ? 'sen' : 'jun');
    span.textContent = t.tok[i];
    let tip = sen ? 'senior' : 'junior';
    const v = t.s ? t.s[i] : null;
    if (v !== null && v !== undefined){
      tip += ' · −log p = ' + v;
      if (shade) span.style.setProperty('--a', (0.06 + 0.8 * Math.min(v / D.scale, 1)).toFixed(3));
    }
    if (!sen && since >= 0 && since < D.post){
      span.classList.add('post'); tip += ' · junior token ' + (since + 1) + ' after a handoff';
      if (v !== null && v !== undefined) post.push(v);
      since += 1;
    }
    span.title = tip; frag.appendChild(span);
  }
  body.appendChild(frag);
  return post;
}
function traceDiv(t){
  const div = document.createElement('div');
  div.className = 'trace ' + (t.ok ? 'right' : 'wrong');
  div.dataset.benchmark = t.b; div.dataset.problem = t.p; div.dataset.correct = t.ok ? '1' : '0';
  div.dataset.mode = modeOf(t);
  const meta = document.createElement('div'); meta.className = 'meta';
  const senior = t.a.length ? (100 * (t.a.split('1').length - 1) / t.a.length).toFixed(0) : '-';
  meta.innerHTML = '<b></b> · sample <b></b> · <b></b> · junior <b class="junior"></b> · answer <b></b> (gold <b></b>) · ' +
    '<b></b> · senior tokens ' + senior + '% · finish ';
  const bs = meta.querySelectorAll('b');
  [t.b + ' / ' + t.p, String(t.i), modeOf(t), t.jr, t.ans, t.gold, t.ok ? '✔ correct' : '✘ wrong']
    .forEach((v, i) => { bs[i].textContent = v; });
  meta.appendChild(document.createTextNode(t.fin));
  const det = document.createElement('details'), sum = document.createElement('summary');
  sum.textContent = 'prompt'; det.appendChild(sum); det.appendChild(document.createTextNode(t.prompt));
  const body = document.createElement('div'); body.className = 'body';
  if (t.tok){
    const post = tokens(t, body);
    if (post.length){
      const mean = post.reduce((a, b) => a + b, 0) / post.length;
      const note = document.createElement('div'); note.className = 'meta post-note';
      note.textContent = 'junior surprise right after handoffs (first ' + D.post + ' tokens, outlined): mean −log p = ' +
        mean.toFixed(2) + ' over ' + post.length + ' tokens';
      meta.after(note);
    }
  } else body.textContent = t.text;
  div.append(meta, det, body);
  return div;
}
function render(){
  const rows = selected(), modes = uniq(rows.map(modeOf));
  const groups = [], index = {};
  rows.forEach(t => { const key = t.b + '\u0000' + t.p + '\u0000' + t.h + '\u0000' + t.i;
    if (!(key in index)){ index[key] = groups.length; groups.push({}); } groups[index[key]][modeOf(t)] = t; });
  const pages = Math.max(1, Math.ceil(groups.length / PER));
  page = Math.min(page, pages - 1);
  $('status').textContent = rows.length + ' of ' + T.length + ' traces match, in ' + groups.length +
    ' rows (one per problem and sample; columns: ' + modes.join(' | ') + ')' + (T.length < D.total ?
    ' (the page holds ' + T.length + ' of the runs\' ' + D.total + ' traces: --max-traces)' : '');
  $('page').textContent = ' page ' + (page + 1) + ' / ' + pages + ' ';
  const main = $('traces'); main.innerHTML = '';
  groups.slice(page * PER, (page + 1) * PER).forEach(g => {
    const pair = document.createElement('div'); pair.className = 'pair';
    pair.style.gridTemplateColumns = 'repeat(' + modes.length + ', minmax(0, 1fr))';
    modes.forEach(m => {
      if (g[m]) pair.appendChild(traceDiv(g[m]));
      else { const e = document.createElement('div'); e.className = 'trace empty'; e.textContent = m + ': no trace';
        pair.appendChild(e); }
    });
    main.appendChild(pair);
  });
}
$('f-bench').addEventListener('change', () => { problems(); page = 0; render(); });
['f-problem', 'f-correct', 'f-mode', 'f-shade'].forEach(id => $(id).addEventListener('change', () => { page = 0; render(); }));
$('prev').addEventListener('click', () => { page = Math.max(0, page - 1); render(); });
$('next').addEventListener('click', () => { page += 1; render(); });
render();
})();
"""
