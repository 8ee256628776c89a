"""`python -m tandem_eval.demo`: the demo under the command path users and scripts have run since the first
release. The code lives in the command-line package (tandem_eval/cli/demo.py); this file only runs it, so
importing it gives nothing (import tandem_eval.cli.demo).

    python -m tandem_eval.demo --out runs/demo     # from any directory; --out relative to it
"""

if __name__ == "__main__":
    import runpy

    runpy.run_module("tandem_eval.cli.demo", run_name="__main__", alter_sys=True)
