"""The Hugging Face Space files: requirements, front matter, and `python app.py` serving the app."""

import os
import re
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_space_requirements_pin_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    requirements = [line for line in lines if line and not line.startswith(("#", "-"))]
    assert requirements == project
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    assert "torch==2.13.0" in requirements


def test_space_front_matter_names_gradio_6_31_and_app_py():
    text = (ROOT / "docs" / "space.md").read_text()
    front = re.search(r"```yaml\n---\n(.*?)\n---\n```", text, re.S).group(1)
    fields = dict(line.split(": ", 1) for line in front.splitlines())
    assert fields["sdk"] == "gradio" and fields["sdk_version"] == "6.31.0"
    assert fields["app_file"] == "app.py" and fields["python_version"] == '"3.11"'
    assert (ROOT / fields["app_file"]).is_file()


def test_python_app_py_serves_the_demo(app_checkpoint):
    port = free_port()
    env = {**os.environ, "HPD_MODEL": str(app_checkpoint), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(port), "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        page = _wait_for_page(f"http://127.0.0.1:{port}/", server)
        assert "HPD-Parsing" in page
    finally:
        server.terminate()
        server.wait(10)


def _wait_for_page(url: str, server: subprocess.Popen, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read().decode()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode()
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {timeout} s")
