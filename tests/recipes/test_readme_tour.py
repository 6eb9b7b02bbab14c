"""The README's tour, line by line in its order, in the state `make demo` leaves: what a newcomer types.

`scripts/demo.py` runs first (offline, the pretrained checkpoint from ../shared), in a fresh
folder with fresh cache/config/state folders; then every line of the README's tour block runs
in that folder with the venv's `mmsctl` first on PATH (as after `source .venv/bin/activate`) and
no AWS set up at all. Four adaptations, so the test can run beside other servers on this machine:
`serve start` gets `--port P` and `curl` talks to P instead of 8080, `top` (a live screen
that waits for `q`) runs with `--once`, and `bench` measures each level for 1 s instead of 3 (the
two squeezenet workers it loads otherwise spend ~10 CPU s of the suite answering it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO, SQUEEZENET_DIR, require_shared
from tests.support._proc import port_block

pytestmark = pytest.mark.slow


def tour_lines() -> list[str]:
    """The commands of the README's tour block (the first ```sh block after "The tour")."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("The tour"):]
    block = block[block.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def _adapt(line: str, port: int) -> str:
    if line.startswith("mmsctl serve start"):
        return f"{line} --port {port}"
    if line.startswith("mmsctl top"):
        return f"{line} --once"
    if line.startswith("mmsctl bench"):
        assert " -d 3s" in line, line
        line = line.replace(" -d 3s", " -d 1s")
    return line.replace("127.0.0.1:8080", f"127.0.0.1:{port}")


def test_the_tour_is_short_and_needs_no_network_aws_or_java() -> None:
    lines = tour_lines()
    assert lines[0] == "mmsctl predict squeezenet kitten.jpg" and lines[-1] == "mmsctl serve stop"
    assert 6 <= len(lines) <= 14
    assert all("--dry-run" in line for line in lines if line.startswith(("mmsctl ec2 launch", "mmsctl fleet create")))
    assert not any("--context" in line for line in lines)  # no server the newcomer does not have


def test_the_readme_tour_runs_in_order_after_make_demo(tmp_path: Path) -> None:
    require_shared(SQUEEZENET_DIR)
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(Path(bin_dir).parent),
               HOME=str(tmp_path / "home"), AWS_EC2_METADATA_DISABLED="true", COLUMNS="200")
    demo = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=180)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert (work / "kitten.jpg").is_file() and any((work / "photos").iterdir())

    port = port_block()
    outputs: dict[str, str] = {}
    try:
        for line in tour_lines():
            run = subprocess.run(["bash", "-c", _adapt(line, port)], cwd=work, env=env, capture_output=True,
                                 text=True, timeout=180, stdin=subprocess.DEVNULL)
            assert run.returncode == 0, f"{line}\n{run.stdout}\n{run.stderr}"
            assert "Traceback" not in run.stderr, f"{line}\n{run.stderr}"
            outputs[line] = run.stdout + run.stderr
    finally:
        subprocess.run(["mmsctl", "serve", "stop", "--all"], cwd=work, env=env, capture_output=True, timeout=60)
    said = list(outputs.values())
    assert "Egyptian cat" in said[0]  # the pretrained model, by name, offline
    assert said[1].count('"input"') == len(list((work / "photos").iterdir()))
    assert '"probability"' in outputs["curl -X POST http://127.0.0.1:8080/predictions/squeezenet -T kitten.jpg"]
    assert "squeezenet scaled to 2 workers (2 ready)" in outputs["mmsctl scale squeezenet --min-workers 2 --wait"]
    launch = outputs["mmsctl ec2 launch --accelerator g4dn -m squeezenet --dry-run"]
    assert "nothing was looked up in AWS" in launch and "warning" not in launch  # the tour shows nothing retired
    assert "stopped" in said[-1]
