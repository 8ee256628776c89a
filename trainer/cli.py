"""`tandem-train`: train one recipe.

    tandem-train --recipe trainer/recipes/cpu-tandem.yaml
    tandem-train --recipe trainer/recipes/cpu-tandem.yaml --set arm=grpo schedule=solo --set output_dir=runs/g
    tandem-train --recipe trainer/recipes/cpu-tandem.yaml --learning_rate 2e-6 --report_to tensorboard
    tandem-train --recipe trainer/recipes/tandem.yaml --resume auto          # continue the latest checkpoint
    tandem-train --recipe trainer/recipes/tandem.yaml --print                # show the resolved recipe only
    tandem-train --recipe trainer/recipes/tandem.yaml --push_to_hub --hub_model_id me/tandem-4b
    accelerate launch --config_file trainer/accelerate/zero3.yaml -m trainer --recipe trainer/recipes/tandem.yaml

A recipe is trl's GRPOConfig plus the tandem fields: every option below can be a key of the recipe
YAML, a `--set key=value` item (YAML value: --set report_to=[wandb,trackio]) or a `--key value`
option (trl's own CLI syntax); later sources win (file < --set < --key).
Exit status 2 for configuration errors and fail-closed authorship errors (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys

import yaml

_OWN = ("recipe", "set", "resume", "print_only")


def parser():
    """trl's argument parser for every Recipe field, plus tandem-train's own options."""
    from transformers import HfArgumentParser

    from .recipe import DERIVED, Recipe

    summary, _, rest = __doc__.partition("\n\n")
    p = HfArgumentParser(
        Recipe,
        prog="tandem-train",
        usage="tandem-train --recipe FILE [--set KEY=VALUE ...] [--resume auto|CKPT] [--print] [--FIELD VALUE ...]",
        description=summary,  # once (the epilog carries the rest of the docstring)
        epilog=rest,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # --resume must not silently mean --resume_from_checkpoint
    )
    # Recipe fields come from the YAML unless given here: keep only what the user typed.
    for action in p._actions:
        if action.dest != "help":
            action.default, action.required = argparse.SUPPRESS, False
        if action.dest in DERIVED:  # refused when given (set what DERIVED names): not listed as an option
            action.help = argparse.SUPPRESS

    def one_line(message: str) -> None:  # argparse's default also prints the usage: errors are one line here
        p.exit(2, f"tandem-train: error: {message} (see tandem-train --help)\n")

    p.error = one_line
    own = p.add_argument_group("tandem-train")
    own.add_argument("--recipe", required=True, help="recipe YAML (trainer/recipes/*.yaml)")
    own.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields with YAML values (old dotted names work: eval.every=10, trl.warmup_steps=5)",
    )
    own.add_argument(
        "--resume", metavar="auto|CHECKPOINT", help="continue from a checkpoint (auto: the latest in output_dir)"
    )
    own.add_argument("--print", action="store_true", dest="print_only", help="print the resolved recipe and exit")
    return p


def main(argv=None) -> None:
    from tandem_eval.data import BenchmarkError
    from tandem_eval.models import ModelError
    from tandem_eval.schemas import ConfigError

    from .recipe import load_recipe, recipe_to_dict
    from .rollout import AuthorshipError

    ns = vars(parser().parse_args(argv))
    options = {k: v for k, v in ns.items() if k not in _OWN}
    try:
        recipe = load_recipe(ns["recipe"], ns["set"], options)
        if ns["print_only"]:
            print(yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False), end="")
            return
        from .run import train

        out = train(recipe, recipe_file=ns["recipe"], resume=ns["resume"])
    except (ConfigError, AuthorshipError, BenchmarkError, ModelError) as e:
        print(f"tandem-train: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"done: {out}")


if __name__ == "__main__":
    main()
