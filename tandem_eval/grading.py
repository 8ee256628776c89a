"""`python -m tandem_eval.grading ANSWER GOLD`: grading one answer by hand, under the command path the
documentation gave before the stage packages (the grader is tandem_eval/generate/grading.py). This file only
runs it, so importing it gives nothing (import tandem_eval.generate.grading).
"""

if __name__ == "__main__":
    import runpy

    runpy.run_module("tandem_eval.generate.grading", run_name="__main__", alter_sys=True)
