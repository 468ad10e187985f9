"""Only a UserError prints as one line without a traceback; any other exception (a bug) prints a one-line
summary on the console and its full traceback into the job's log (bertology.workflow.cli.main, report_bug)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bertology.workflow import cli
from bertology.pipeline.errors import UserError


def _boom(ctx):
    return 1 / 0


def _user(ctx):
    raise UserError("the thing is wrong; fix it\n  like this")


def _value(ctx):
    raise ValueError("a numpy-style complaint from deep inside")


def test_a_user_error_is_one_line_without_traceback(monkeypatch, capsys):
    monkeypatch.setattr("bertology.steps.admin.validate_config", _user)
    assert cli.main(["validate-config"]) == 1
    err = capsys.readouterr().err
    assert err == "bertology validate-config: error: the thing is wrong; fix it like this\n"


@pytest.mark.parametrize("step, exc", [(_boom, "ZeroDivisionError"), (_value, "ValueError")])
def test_a_bug_in_a_job_puts_its_traceback_in_the_log(monkeypatch, capsys, step, exc):
    """Under a rule stderr is the job's log (not a terminal): the traceback, then the one-line summary."""
    monkeypatch.setattr("bertology.steps.admin.validate_config", step)
    assert cli.main(["validate-config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert f'in {step.__name__}' in err                       # the frame where it happened
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith(f"bertology validate-config: internal error (a bug, please report it): {exc}: ")
    assert last.endswith("(traceback above)")


def test_a_bug_in_a_terminal_is_one_line_naming_the_traceback_file(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("bertology.steps.admin.validate_config", _boom)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert cli.main(["validate-config", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "ZeroDivisionError: division by zero" in err
    (log,) = (tmp_path / ".bertology" / "errors").iterdir()
    assert f"traceback in {log.relative_to(tmp_path)}" in err
    text = log.read_text()
    assert text.startswith("bertology validate-config --no-progress\nTraceback (most recent call last):")
    assert "return 1 / 0" in text and text.rstrip().endswith("ZeroDivisionError: division by zero")


def test_debug_raises_the_bug_itself(monkeypatch):
    monkeypatch.setattr("bertology.steps.admin.validate_config", _boom)
    with pytest.raises(ZeroDivisionError):
        cli.main(["validate-config", "--debug"])


def test_a_rule_style_redirect_keeps_the_traceback_in_the_log_file(tmp_path):
    """As a rule runs it: ``bertology <step> ... > {log} 2>&1`` in a separate process."""
    code = ("import bertology.steps.admin as a\n"
            "def step(ctx):\n    return {}['missing key']\n"
            "a.validate_config = step\n"
            "from bertology.workflow.cli import main\nraise SystemExit(main(['validate-config']))\n")
    log = tmp_path / "job.log"
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "-c", code], stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path).returncode
    assert rc == 1
    text = log.read_text()
    assert "Traceback (most recent call last):" in text and "KeyError: 'missing key'" in text
    assert text.rstrip("\n").split("\n")[-1] == ("bertology validate-config: internal error (a bug, please report "
                                                 "it): KeyError: 'missing key' (traceback above)")
    assert not (tmp_path / ".bertology").exists()
