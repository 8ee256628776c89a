"""`tandem-train`: train one recipe.

    tandem-train --recipe trainer/recipes/cpu-tandem.yaml
    tandem-train --recipe trainer/recipes/cpu-tandem.yaml --set arm=grpo schedule=solo --set output_dir=runs/g
    tandem-train --recipe trainer/recipes/tandem.yaml --resume auto          # continue the latest checkpoint
    tandem-train --recipe trainer/recipes/tandem.yaml --print                # show the resolved recipe only
    accelerate launch --config_file trainer/accelerate/zero3.yaml -m trainer --recipe trainer/recipes/tandem.yaml

Exit status 2 for configuration errors and fail-closed authorship errors (message on stderr).
"""

from __future__ import annotations

import argparse
import sys

import yaml


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="tandem-train",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument("--recipe", required=True, help="recipe YAML (trainer/recipes/*.yaml)")
    p.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields (dotted for sections: eval.every=10, trl.warmup_steps=5)",
    )
    p.add_argument(
        "--resume", metavar="auto|CHECKPOINT", help="continue from a checkpoint (auto: the latest in output_dir)"
    )
    p.add_argument("--print", action="store_true", dest="print_only", help="print the resolved recipe and exit")
    return p.parse_args(argv)


def main(argv=None) -> None:
    from tandem_eval.config import ConfigError
    from tandem_eval.data import BenchmarkError
    from tandem_eval.models import ModelError

    from .recipe import load_recipe, recipe_to_dict
    from .rollout import AuthorshipError

    args = parse_args(argv)
    try:
        recipe = load_recipe(args.recipe, args.set)
        if args.print_only:
            print(yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False), end="")
            return
        from .run import train

        out = train(recipe, recipe_file=args.recipe, resume=args.resume)
    except (ConfigError, AuthorshipError, BenchmarkError, ModelError) as e:
        print(f"tandem-train: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"done: {out}")


if __name__ == "__main__":
    main()
