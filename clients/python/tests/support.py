"""What the tests share: the package under test, a real `rpcd serve` to run against, a
recorder of the frames a client sends and reads, and a watchdog for tests that hang.

The tests import the package from ../src, next to them, unless $RPCD_PY_INSTALLED is set:
then they import the installed one (CI runs them so from a venv it pip-installed into).
"""

import asyncio
import faulthandler
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
if os.environ.get("RPCD_PY_INSTALLED"):
    import rpcd  # noqa: E402
    if os.path.dirname(os.path.dirname(os.path.abspath(rpcd.__file__))) == SRC:
        raise ImportError("RPCD_PY_INSTALLED is set, but rpcd comes from the source tree %s" % SRC)
else:
    sys.path.insert(0, SRC)
    import rpcd  # noqa: E402,F401

# The repository's root, when the tests run from a checkout (for proto/testdata/golden.txt).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

RPCD_BIN = os.environ.get("RPCD_BIN", "")
NO_BIN = "RPCD_BIN is not set: the live tests need a built rpcd (go build -o /tmp/rpcd ./cmd/rpcd)"
TEST_SECONDS = 60  # a test that runs longer is stuck: dump every stack and exit

_SERVING = re.compile(r"rpcd: serving\b.*?\baddr=(\S+)")


class Server:
    """An `rpcd serve` process on 127.0.0.1, port 0; addr is what it logged it serves."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([RPCD_BIN, "serve", "-addr", "127.0.0.1:0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log = []
        found = threading.Event()

        def drain():  # read every line, so that the server never blocks on its stderr
            for line in self.proc.stderr:
                self.log.append(line)
                m = _SERVING.search(line)
                if m and not found.is_set():
                    self.addr = m.group(1)
                    found.set()
            found.set()

        self.addr = ""
        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        found.wait(15)
        if not self.addr:
            self.proc.kill()
            raise RuntimeError("rpcd serve did not log its address:\n" + "".join(self.log))

    def stop(self) -> int:
        """SIGTERM: rpcd drains and exits 0. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._drain.join(5)
            self.proc.stderr.close()


def tokens_file(lines) -> str:
    """A token file for -auth-tokens ("TOKEN SUBJECT [ROLE,...]" per line); removed at exit."""
    fd, path = tempfile.mkstemp(prefix="rpcd-py-tokens-")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    import atexit
    atexit.register(os.remove, path)
    return path


class Recorder:
    """Records the frames a client writes (sent) and reads (read), decoded."""

    def __init__(self, c: "rpcd.Client"):
        self.sent, self.read = [], []
        write, dispatch = c._writer.write, c._dispatch

        def rec_write(data):
            i = 0
            while i < len(data):  # one call writes whole frames, one or more
                h = rpcd.protocol.check_header(bytes(data[i:i + 24]))
                end = i + 24 + h.body_len
                self.sent.append(rpcd.protocol.decode_body(h, bytes(data[i + 24:end])))
                i = end
            write(data)

        def rec_dispatch(f):
            self.read.append(f)
            dispatch(f)

        c._writer.write = rec_write
        c._dispatch = rec_dispatch

    def kinds(self, frames):
        return [f.kind for f in frames]


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    """An asyncio test with a watchdog: past TEST_SECONDS every stack is dumped and the
    process exits, so that a hang fails the run instead of stalling it."""

    def setUp(self):
        faulthandler.dump_traceback_later(TEST_SECONDS, exit=True)

    def tearDown(self):
        faulthandler.cancel_dump_traceback_later()


async def eventually(cond, seconds: float = 5.0, what: str = "condition"):
    """Wait until cond() holds, polling; AssertionError past seconds."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        await asyncio.sleep(0.005)
