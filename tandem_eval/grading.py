"""`python -m tandem_eval.grading ANSWER GOLD`: grading one answer by hand, under the command path the
documentation gave before the stage packages (the grader is tandem_eval/generate/grading.py). This file only
runs it; the grader's names imported from here (`from tandem_eval.grading import grade`, the documented
Python path before) come from tandem_eval.generate.grading with a FutureWarning (tandem_eval/compat.py).
"""


def __getattr__(name: str):  # names this module no longer holds: tandem_eval.compat serves them
    from .compat import former_name

    return former_name(__name__, name)


if __name__ == "__main__":
    import runpy

    runpy.run_module("tandem_eval.generate.grading", run_name="__main__", alter_sys=True)
