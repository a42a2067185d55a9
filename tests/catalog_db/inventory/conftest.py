"""A real moto server on 127.0.0.1 for the whole session, reset before each test that uses it.

Credentials are fake and recognisable (tests assert they never reach logs or the catalog); they
are passed to boto3.Session explicitly, so nothing here reads or changes the environment.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

FAKE_KEY_ID = "AKIACORALFAKEKEY0001"
FAKE_SECRET = "coral-FAKE-secret-9f8e7d6c5b4a"
FAKE_TOKEN = "coral-FAKE-session-token-1a2b3c4d"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise RuntimeError(f"moto_server did not answer on {url} within {timeout_s} s")


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """Start `moto_server -H 127.0.0.1 -p <free port>`; kill it when the session ends."""
    server = Path(sys.executable).parent / "moto_server"
    port = _free_port()
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def moto(moto_url: str) -> str:
    """The moto endpoint with all state (instances, ...) reset."""
    request = urllib.request.Request(moto_url + "/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass
    return moto_url


@pytest.fixture
def aws_session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=FAKE_KEY_ID,
        aws_secret_access_key=FAKE_SECRET,
        aws_session_token=FAKE_TOKEN,
        region_name="us-east-1",
    )
