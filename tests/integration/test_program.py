"""``mt`` as a program (transformer_mt.__main__): how it starts (the collector paused over
its imports, tcmalloc preloaded) and a Ctrl-C as it starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO, in_the_foreground, run_cli


def _program(argv: list[str], report: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``mt ARGV`` through transformer_mt.__main__ in a fresh interpreter (its environment
    ``env``, else this one's), then ``report`` (a Python expression) printed to stderr: what
    the process looks like after the command."""
    script = ("import gc, sys\n"
              "from transformer_mt.__main__ import main\n"
              f"sys.argv = ['mt', *{argv!r}]\n"
              "try:\n    code = main()\nexcept SystemExit as exc:\n    code = exc.code\n"
              "cycle = []; cycle.append(cycle); del cycle\n"
              f"print(code, {report}, file=sys.stderr)\n")
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env)


def test_the_program_sets_its_imports_aside_from_the_collector(trained_run):
    """``mt`` (transformer_mt.__main__) pauses the garbage collector until torch is imported
    and freezes what was made; it translates as cli.main does, and the collector is on again
    after, collecting what the command leaves. ``mt translate --help`` imports no torch. And
    with a core to spare, the word model's spaCy and sacremoses ran in the word worker
    (data/word_worker.py), not in ``mt`` (where a sentence has no mark before more text, as
    these: one with "z. B." asks spaCy's sentencizer here whether it is one). Translating
    takes no file lock, so portalocker (~0.1 s: it imports redis) stays unimported."""
    run_dir, _ = trained_run
    argv = ["translate", "--quiet", "--checkpoint", str(run_dir / "best.pt"), "Ein Hund läuft.",
            "„Zwei Männer“ (in Köln) spielen Fußball!", "Eine Frau, 3,5 km/h."]
    fresh = _program(argv, "gc.isenabled(), gc.get_freeze_count() > 100_000, gc.collect() > 0,"
                     " 'spacy' in sys.modules, 'sacremoses' in sys.modules,"
                     " 'portalocker' in sys.modules")
    in_worker = str((os.cpu_count() or 1) < 2)
    assert fresh.stderr.split() == ["0", "True", "True", "True", in_worker, in_worker,
                                    "False"], fresh.stderr
    assert fresh.stdout == run_cli(argv).stdout and fresh.stdout.strip()
    helped = _program(["translate", "--help"], "'torch' in sys.modules")
    assert helped.stderr.split() == ["0", "False"], helped.stderr  # help without torch
    assert "--checkpoint" in helped.stdout


def test_the_program_runs_with_tcmalloc_where_it_is_installed(trained_run):
    """Where tcmalloc is installed, ``mt`` starts again with it preloaded: its memory map
    holds it, and it translates as the system's malloc does (``MT_ALLOCATOR=system``, and
    ``cli.main`` here); an allocator already preloaded is the only one (no second start); an
    ``MT_ALLOCATOR`` that names no file is a one-line error."""
    from transformer_mt.__main__ import tcmalloc

    library = tcmalloc()
    if library is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs it: install Debian's libtcmalloc-minimal4 (.ci/run does)")
        pytest.skip("tcmalloc is not installed (apt install libtcmalloc-minimal4)")
    run_dir, _ = trained_run
    argv = ["translate", "--quiet", "--checkpoint", str(run_dir / "best.pt"), "Ein Hund läuft.",
            "Zwei Männer spielen Fußball."]
    report = ("'libtcmalloc' in open('/proc/self/maps').read(), "
              "__import__('os').environ.get('LD_PRELOAD', '-')")
    plain = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MT_ALLOCATOR")}
    expected = run_cli(argv).stdout
    assert expected.strip()
    for env, seen in ((plain, ["0", "True", library]),
                      ({**plain, "MT_ALLOCATOR": "system"}, ["0", "False", "-"]),
                      ({**plain, "LD_PRELOAD": library}, ["0", "True", library])):
        fresh = _program(argv, report, env)
        assert fresh.stderr.split() == seen, fresh.stderr
        assert fresh.stdout == expected
    missing = _program(argv, "0", {**plain, "MT_ALLOCATOR": "/no/such/libmalloc.so"})
    assert missing.stderr.splitlines() == [
        "mt: error: MT_ALLOCATOR=/no/such/libmalloc.so: no such library (set it to a shared "
        "library's path, or to system or auto)", "2 0"]


def test_ctrl_c_as_the_program_starts_is_one_line(trained_run):
    """Ctrl-C while ``mt`` still imports torch (its libraries mapped, its modules loading)
    ends as a Ctrl-C in the command does: exit 130, one line, no traceback."""
    run_dir, _ = trained_run
    proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "info",
                             str(run_dir / "best.pt")], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=in_the_foreground)
    deadline = time.monotonic() + 60
    while "libtorch" not in _mapped(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "mt info: interrupted\n")


@pytest.mark.parametrize("where", ["import", "restart"])
def test_ctrl_c_as_the_program_starts_is_not_lost(trained_run, where):
    """A Ctrl-C inside torch's imports that a library there catches and goes on without (as
    numpy's import did: torch went on without NumPy, mt train trained on), or one just before
    ``mt`` starts again with its allocator (a traceback then, or lost with the process image),
    still ends the command: 130, one line."""
    from transformer_mt.__main__ import tcmalloc

    if where == "restart" and tcmalloc() is None:
        pytest.skip("no tcmalloc: mt does not start again")
    run_dir, _ = trained_run
    hook = {"import": "import builtins\n"  # the first import of torch: the library's catch
                      "real = builtins.__import__\n"
                      "def caught(name, *args, **kwargs):\n"
                      "    if name == 'torch' and 'torch' not in sys.modules:\n"
                      "        try:\n"
                      "            os.kill(os.getpid(), signal.SIGINT); time.sleep(0.3)\n"
                      "        except KeyboardInterrupt:\n"
                      "            pass\n"
                      "    return real(name, *args, **kwargs)\n"
                      "builtins.__import__ = caught\n",
            "restart": "execve = os.execve\n"  # (the process started again runs this too)
                       "def restart(*args):\n"
                       "    os.kill(os.getpid(), signal.SIGINT); execve(*args)\n"
                       "os.execve = restart\n"}[where]
    script = ("import os, signal, sys, time\n" + hook +
              "from transformer_mt.__main__ import main\n"
              f"sys.argv = ['mt', 'info', {str(run_dir / 'best.pt')!r}]\n"
              "sys.exit(main())\n")
    env = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env, preexec_fn=in_the_foreground)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "mt info: interrupted\n")


def _mapped(pid: int) -> str:
    """The files a running process has mapped (its /proc maps), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
            return maps.read()
    except OSError:
        return ""
