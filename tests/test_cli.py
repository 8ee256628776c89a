"""The CLI layer itself: a light import, one definition per option, choices, the one error path.

PYTHONPATH=$PWD python -m pytest -q tests/test_cli.py
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tandem_eval.cli import common as cli_common
from tandem_eval.cli import main as cli

HEAVY = ("torch", "transformers", "vllm", "pandas")


def test_importing_the_cli_imports_no_torch_transformers_vllm_or_pandas():
    code = f"import sys, tandem_eval.cli; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True)
    assert out.stdout.strip() == "", f"imported by `import tandem_eval.cli`: {out.stdout.strip()}"


def test_help_lists_every_command_without_importing_them():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom tandem_eval.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output\n"
        f"print(r.output)\nprint('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True)
    for name in ("solo", "handoff", "legibility", "drift", "compare", "report", "view"):
        assert f" {name} " in out.stdout
    assert out.stdout.strip().endswith("HEAVY="), out.stdout[-200:]


@pytest.mark.parametrize("name", sorted(cli.LAZY_COMMANDS))
def test_lazy_command_help_in_the_list_is_its_docstring(name):
    """The command list reads docstrings from the source; they must be the ones the command runs with."""
    import importlib

    module, function = cli.LAZY_COMMANDS[name]
    assert cli._docstring(module, function) == inspect.getdoc(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize(
    "args, expect",
    [
        (["solo", "--engine", "tpu"], "'tpu' is not one of 'hf', 'vllm', 'served'"),
        (["handoff", "--dtype", "float64"], "'float64' is not one of 'auto', 'float32', 'bfloat16', 'float16'"),
        (["legibility", "--engine", "jax"], "'jax' is not one of 'hf', 'vllm', 'served'"),
        (["drift", "--dtype", "int8"], "'int8' is not one of"),
        (["compare", "a", "b", "-m", "kl_exact", "--on-mismatch", "maybe"], "'maybe' is not one of 'raise'"),
    ],
)
def test_a_value_outside_a_choice_is_refused_in_one_line(args, expect):
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], r.stderr


@pytest.mark.parametrize("command", ["solo", "handoff", "legibility", "drift"])
def test_a_served_model_that_is_not_there_is_one_line_naming_its_server_before_any_work(command, tmp_path):
    """Every command takes served models (--engine served, tests/test_served.py runs them against a real
    server); a server that does not answer is one line naming it, before any URL is read as a folder and
    before any run folder is made."""
    url = "http://127.0.0.1:9"
    args = [command, "--engine", "served", "--senior", f"{url}/v1#x", "--benchmark", "tiny"]
    args += ["--junior", f"{url}/v1#x"] if command != "solo" else []
    r = CliRunner().invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"server {url} is unreachable" in lines[0], r.stderr
    assert "checkpoint not found" not in lines[0] and not (tmp_path / "out").exists()


def test_a_user_error_is_one_line_and_debug_shows_its_traceback(tmp_path):
    args = ["merge", str(tmp_path)]  # no shard folders: FileNotFoundError, a user error
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 2 and r.stderr.strip().startswith("error: no shard-I-of-N folders")
    assert len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(cli.app, ["--debug", *args])
    assert isinstance(r.exception, FileNotFoundError)  # raised, not turned into a one-liner


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    def broken(*a, **k):
        raise ValueError("a bug, not bad input")

    monkeypatch.setattr("tandem_eval.generate.execute.merge_shards", broken)
    (tmp_path / "shard-0-of-1" / "solo").mkdir(parents=True)
    (tmp_path / "shard-0-of-1" / "solo" / "config.json").write_text("{}")
    r = CliRunner().invoke(cli.app, ["merge", str(tmp_path)])
    assert isinstance(r.exception, ValueError) and "error:" not in r.stderr


def test_shared_options_are_defined_once():
    """solo, handoff, legibility and drift use cli_common's option types, not their own copies."""
    from tandem_eval.cli import lens as cli_lens

    for fn in (cli.solo, cli.handoff, cli_lens.legibility_cmd, cli_lens.drift_cmd):
        hints = inspect.get_annotations(fn, eval_str=True)
        for option in ("senior", "benchmark", "n", "limit", "engine", "dtype", "out", "label"):
            assert hints[option] is getattr(cli_common, f"{option.title()}Opt" if option != "n" else "NOpt"), (
                fn.__name__,
                option,
            )


def test_solo_and_handoff_build_their_config_in_one_function():
    """Every option of solo and handoff is an EvalConfig field, a sampling setting, or named as not one."""
    from tandem_eval.config import Sampling, default_ks

    for command, mode in ((cli.solo, "solo"), (cli.handoff, "handoff")):
        options = {name: p.default for name, p in inspect.signature(command).parameters.items()}
        options.update(senior=cli.DEFAULT_SENIOR, **({"junior": cli.DEFAULT_SENIOR} if mode == "handoff" else {}))
        cfg = cli.run_config(mode, options)
        assert (cfg.mode, cfg.sampling, cfg.ks, cfg.label) == (mode, Sampling(), default_ks(8), "tandem")
        with pytest.raises(TypeError, match="stray"):
            cli.run_config(mode, {**options, "stray": 1})  # a local that is no option is refused, not dropped
