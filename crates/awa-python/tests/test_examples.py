"""The getting-started example runs, and docs/getting-started-python.md
shows it exactly."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from conftest import DEADLINE

CRATE = pathlib.Path(__file__).resolve().parent.parent
GUIDE = CRATE.parent.parent / "docs" / "getting-started-python.md"
EXAMPLE = CRATE / "examples" / "quickstart.py"


def test_the_quickstart_runs(db_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env={**os.environ, "DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "welcome mail to ada@example.com (user 1, attempt 1)" in out
    assert "welcome mail to bob@flaky.example (user 2, attempt 2)" in out
    assert "stopped after 2 completed jobs" in out


def test_the_guide_shows_the_example_verbatim() -> None:
    code = EXAMPLE.read_text()
    assert f"```python\n{code}```" in GUIDE.read_text(), (
        "docs/getting-started-python.md does not show examples/quickstart.py as it is; "
        "paste it in a ```python block"
    )
