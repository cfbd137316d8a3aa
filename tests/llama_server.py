"""A real OpenAI-compatible server for tests: llama-cpp-python's (`make test` installs it,
`llama-cpp-python[server]`), serving a GGUF that llama.cpp's own converter (unpacked from
the same source distribution into .venv/llama-convert) made from a model the tests train.

The server runs with a float32 key/value cache (`--type_k 0 --type_v 0`, GGML_TYPE_F32;
llama.cpp's default is float16, which rounds every key and value to 11 significant bits and
moves log-probabilities by up to about 1e-3) so that its arithmetic is float32 throughout,
as the transformers forward it is compared with."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONVERTER = Path(os.environ.get("PDDKIT_GGUF_CONVERTER", ROOT / ".venv" / "llama-convert"))


def need_llama_cpp() -> None:
    """Skip without llama-cpp-python and the converter on a developer's machine; under CI
    (`make test` installs both) their absence is a failure."""
    from conftest import under_ci

    missing = []
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        missing.append("llama-cpp-python (make server)")
    if not (CONVERTER / "convert_hf_to_gguf.py").is_file():
        missing.append(f"llama.cpp's converter in {CONVERTER} (make server)")
    if missing:
        if under_ci():
            pytest.fail(f"missing: {', '.join(missing)}", pytrace=False)
        pytest.skip(f"missing: {', '.join(missing)}")


def convert(model_dir: Path, gguf: Path) -> Path:
    """llama.cpp's convert_hf_to_gguf.py, float32 weights (no rounding beyond float32)."""
    env = {**os.environ, "PYTHONPATH": str(CONVERTER / "gguf-py"), "NO_LOCAL_GGUF": ""}
    done = subprocess.run([sys.executable, str(CONVERTER / "convert_hf_to_gguf.py"), str(model_dir),
                           "--outfile", str(gguf), "--outtype", "f32"],
                          capture_output=True, text=True, env=env, cwd=CONVERTER)
    assert done.returncode == 0 and gguf.is_file(), done.stderr[-3000:]
    return gguf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1 serving `gguf` as `name`; `with` starts it
    (waiting until GET /v1/models answers) and stops it; `log` holds its output, one line
    per request among it (uvicorn's access log)."""

    def __init__(self, gguf: Path, log: Path, name: str = "tiny", n_ctx: int = 512) -> None:
        self.port = free_port()
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.args = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
                     "--host", "127.0.0.1", "--port", str(self.port), "--model_alias", name,
                     "--n_ctx", str(n_ctx), "--type_k", "0", "--type_v", "0",
                     "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "false"]

    def __enter__(self) -> LlamaServer:
        self._out = open(self.log, "w")  # closed in __exit__
        self.proc = subprocess.Popen(self.args, stdout=self._out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.api_base + "/models", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"llama_cpp.server did not answer in 120 s: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._out.close()

    def requests(self, status: int | None = None) -> int:
        """POST /v1/completions requests answered so far (with `status`, those only)."""
        lines = [ln for ln in self.log.read_text().splitlines() if '"POST /v1/completions' in ln]
        return len([ln for ln in lines if status is None or f'" {status} ' in ln])
