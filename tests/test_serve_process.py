"""mt serve as a user runs it: a real process on a free port. SIGTERM lets the requests in
flight finish and exits 0. (The page in a real browser: tests/test_page.py.)"""

from __future__ import annotations

import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.helpers import post, start_server

pytestmark = pytest.mark.system  # tiers: tests/conftest.py
pytest.importorskip("fastapi")


def test_sigterm_finishes_what_is_in_flight_and_exits_0(trained_run):
    proc, url = start_server(trained_run[0] / "best.pt", "--grace", "60")
    sentences = [f"Ein Hund läuft {i} mal über die große grüne Wiese." for i in range(96)]
    answer: list = []
    sender = threading.Thread(target=lambda: answer.append(
        post(url + "/v1/translate", {"text": sentences, "beam": 5})))
    sender.start()
    time.sleep(0.5)  # the request is in flight (it takes seconds)
    proc.send_signal(signal.SIGTERM)
    sender.join(120)
    _, err = proc.communicate(timeout=120)
    assert answer and answer[0][0] == 200, (answer, err)
    assert len(answer[0][1]["translations"]) == 96
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    with pytest.raises(urllib.error.URLError):  # and it no longer listens
        urllib.request.urlopen(url + "/health", timeout=2)
