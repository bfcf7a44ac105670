"""`python -m awa` is the `awa` command line (these tests run it as
`python -m awa` even when AWA_BIN names the binary)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import awa_cli


def test_help_and_usage_exit_codes() -> None:
    ok = subprocess.run([sys.executable, "-m", "awa", "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "Operate an Awa job queue" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "awa", "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr


def test_commands_run_against_the_database(db_url: str, monkeypatch) -> None:
    monkeypatch.delenv("AWA_BIN", raising=False)
    awa_cli(db_url, "job", "enqueue", "--queue", "py_cli", "--kind", "k")
    stats = json.loads(awa_cli(db_url, "--json", "queue", "stats", "py_cli").stdout)
    assert stats["py_cli"]["available"] == 1
    held = awa_cli(db_url, "job", "enqueue", "--queue", "py_cli", "--kind", "k", "--unique-key", "u")
    again = awa_cli(
        db_url, "job", "enqueue", "--queue", "py_cli", "--kind", "k", "--unique-key", "u", check=False
    )
    assert held.returncode == 0 and again.returncode == 3, "the binary's exit codes"


def test_importing_awa_imports_no_optional_dependency() -> None:
    code = (
        "import sys, awa, awa.sqlalchemy; "
        "loaded = [m for m in ('psycopg', 'pydantic', 'sqlalchemy') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
