"""Shared fixtures: a tiny random senior/junior pair built offline once per test session; the suite's order and
threads under `make test`'s two pytest-xdist workers."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# make test runs two xdist workers (Makefile PYTEST_WORKERS): each gets its share of the cores, since torch's
# OpenMP threads spin-wait and two workers of two threads each on two cores run slower than one thread each
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // WORKERS)))


def pytest_collection_modifyitems(config, items):
    """Files with a slow test first (stable: each file keeps its own order). xdist's loadfile hands files out in
    collection order, so the longest files (the CI-scale toy world, make real) start at once on both workers
    instead of ending the run alone on one while the other idles."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    from tandem_eval.toy.tiny import build_tiny_pair

    senior, junior = build_tiny_pair(tmp_path_factory.mktemp("tiny"))
    return str(senior), str(junior)
