"""Shared fixtures: a tiny random senior/junior pair built offline once per test session."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    from tandem_eval.toy.tiny import build_tiny_pair

    senior, junior = build_tiny_pair(tmp_path_factory.mktemp("tiny"))
    return str(senior), str(junior)
