"""llama.cpp's server, the tests' real engine: found, given its tiny model, started on a free
127.0.0.1 port and always stopped.

Where the binary comes from: ``SPARK_OTEL_LLAMA_SERVER`` (set by ``.ci/run``), else the cached
build of ``scripts/build-llama-server.sh`` (asked with ``--cached``: a cold build takes minutes,
so the tests never start one). Beside it the build keeps gguf-py and llama.cpp's Llama test
vocabulary, from which `tests.support.tiny_llama` writes the model. Missing, it fails where real
components are required (CI) and skips elsewhere, saying how to build it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.support.collector_stack import BACKGROUND, ROOT, Unusable, free_ports

ENV = "SPARK_OTEL_LLAMA_SERVER"
VOCAB = "ggml-vocab-llama-spm.gguf"
START_TIMEOUT_S = 120.0
HOW_TO_BUILD = (
    f"run `make llama-server` (a cold build takes about 27 minutes on 2 cores), whose cached build "
    f"the tests find, or set {ENV} to a build's path"
)


def resolve_llama_server() -> Path | Unusable:
    """``$SPARK_OTEL_LLAMA_SERVER``, else the cached build; gguf-py and the vocabulary beside it."""
    env = os.environ.get(ENV)
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            return Unusable(f"{ENV}={env}: not an executable file", always_fails=True)
    else:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-llama-server.sh"), "--cached"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            return Unusable(f"no llama-server: {ENV} is unset and none is cached: {HOW_TO_BUILD}")
        path = Path(lines[-1])
    if not (path.parent / VOCAB).is_file() or not (path.parent / "gguf-py" / "gguf").is_dir():
        return Unusable(
            f"{path}: gguf-py/ and {VOCAB} are not beside it, as scripts/build-llama-server.sh keeps them",
            always_fails=True,
        )
    return path


@dataclass
class LlamaServer:
    """One running llama-server: its base URL (no ``/v1``), the model id it serves, its log."""

    name: str
    url: str
    model: str
    log_path: Path
    proc: subprocess.Popen[bytes]

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _wait_ready(server: LlamaServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(server.url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} not ready after {START_TIMEOUT_S}s:\n{server.log_tail()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@contextmanager
def running_llama_server(
    binary: Path, model: Path, log_dir: Path, *, name: str, slots: int = 4, threads: int = 1, ctx: int = 4096
) -> Iterator[LlamaServer]:
    """Start one server (``slots`` parallel sequences sharing a ``ctx``-token unified KV cache,
    ``threads`` CPU threads, ``/metrics`` on), wait for ``/health``, stop it on the way out."""
    (port,) = free_ports(1)
    log_path = log_dir / f"{name}.log"
    argv = [
        *BACKGROUND,
        str(binary),
        "--model", str(model),
        "--alias", name,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--ctx-size", str(ctx),
        "--parallel", str(slots),
        "--kv-unified",
        "--threads", str(threads),
        "--threads-batch", str(threads),
        "--metrics",
        "--no-webui",
    ]  # fmt: skip
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir)
    server = LlamaServer(name=name, url=f"http://127.0.0.1:{port}", model=name, log_path=log_path, proc=proc)
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(proc)
