"""How the tests find llama-server: a path that is not a binary always fails, a build that is
missing says how to make one, and the build script's --cached never builds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.support.collector_stack import ROOT, Unusable
from tests.support.llama_server import ENV, resolve_llama_server


def test_a_path_that_is_not_an_executable_always_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "llama-server"))
    found = resolve_llama_server()
    assert isinstance(found, Unusable)
    assert found.always_fails
    assert found.reason == f"{ENV}={tmp_path / 'llama-server'}: not an executable file"


def test_a_binary_without_gguf_py_and_the_vocabulary_beside_it_always_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv(ENV, str(binary))
    found = resolve_llama_server()
    assert isinstance(found, Unusable)
    assert found.always_fails
    assert "gguf-py/ and ggml-vocab-llama-spm.gguf are not beside it" in found.reason


def test_no_cached_build_says_how_to_make_one_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("SPARK_OTEL_CACHE", str(tmp_path / "cache"))
    found = resolve_llama_server()
    assert isinstance(found, Unusable)
    assert not found.always_fails  # a skip on a developer's machine (a failure in CI: `missing`)
    assert "make llama-server" in found.reason
    assert not (tmp_path / "cache").exists()


def test_the_build_script_with_cached_prints_the_cached_binary_last(tmp_path: Path) -> None:
    env = {**os.environ, "SPARK_OTEL_CACHE": str(tmp_path)}
    script = str(ROOT / "scripts" / "build-llama-server.sh")
    missing = subprocess.run(
        ["bash", script, "--cached"], env=env, capture_output=True, text=True, check=False
    )
    assert missing.returncode == 3
    assert "make llama-server" in missing.stderr
    # Whatever key the script computes, a build kept there is what --cached prints.
    key_dir = Path(missing.stderr.split(" at ", 1)[1].split(" (", 1)[0])
    (key_dir / "gguf-py" / "gguf").mkdir(parents=True)
    (key_dir / "ggml-vocab-llama-spm.gguf").write_bytes(b"GGUF")
    (key_dir / "llama-server").write_text("#!/bin/sh\n")
    (key_dir / "llama-server").chmod(0o755)
    found = subprocess.run(["bash", script, "--cached"], env=env, capture_output=True, text=True, check=True)
    assert found.stdout.splitlines()[-1] == str(key_dir / "llama-server")
    assert key_dir.is_relative_to(tmp_path / "llama-server")
