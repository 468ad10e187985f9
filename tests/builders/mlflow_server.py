"""A real `mlflow server` on a free localhost port (sqlite backend) for tests and benchmarks of tracking
outages: start it, freeze it (SIGSTOP: its port still accepts connections but nothing answers, the worst
case for a client), thaw it, stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One `mlflow server` process group; stop() freezes it (SIGSTOP: requests hang), resume() thaws it."""

    def __init__(self, root: Path):
        self.root, self.port = root, _free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        mlflow_bin = Path(sys.executable).parent / "mlflow"
        self.log = open(root / "server.log", "w")
        self.proc = subprocess.Popen(
            [str(mlflow_bin), "server", "--backend-store-uri", f"sqlite:///{root}/server.db",
             "--default-artifact-root", (root / "artifacts").as_uri(), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.uri}/health", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.close()
        raise RuntimeError(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()
