"""The reward: 1 if the team's answer is correct, else 0, by tandem_eval's grader (the same one the
evaluation uses: last \\boxed{}, string normalisation, then math-verify in killable workers).

trl calls the reward function with the decoded completions (`skip_special_tokens=True`, as the
evaluation pipeline decodes) and every dataset column as a keyword, so `answer` arrives per
completion. A grading timeout or error scores 0, like a wrong answer (the paper: no format
reward); the status counts of the latest batch are kept for the step log.

    reward = CorrectnessReward(timeout=5.0)
    reward(prompts=[...], completions=["... \\boxed{7}"], answer=["7"])   # -> [1.0]
"""

from __future__ import annotations

from collections import Counter

from tandem_eval.generate.grading import Grader, check_grader_versions


class CorrectnessReward:
    __name__ = "correct"  # trl logs rewards/correct/mean: the batch accuracy

    def __init__(self, timeout: float = 5.0, allow_grader_mismatch: bool = False):
        self.versions = check_grader_versions(allow_grader_mismatch)
        self.timeout = timeout
        self._grader: Grader | None = None
        self.last_status: Counter = Counter()
        self.last_rewards: list[float] = []  # of the latest call, in completion order

    def __call__(self, prompts, completions, answer, **_) -> list[float]:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        if self._grader is None:
            self._grader = Grader()
        grades = self._grader.grade_many(list(zip(texts, answer)), timeout=self.timeout)
        self.last_status = Counter(g.status for g in grades)
        self.last_rewards = [1.0 if g.correct else 0.0 for g in grades]
        return list(self.last_rewards)

    def close(self) -> None:
        if self._grader is not None:
            self._grader.close()
            self._grader = None
