"""The fake provider of ``tests.support.model_server`` for bench/load.py, with a listen
backlog for hundreds of simultaneous connections.

``http.server`` listens with a backlog of 5: a burst of 100 new connections then sees some of
them reset (httpx ``ReadError``), which would measure the fake rather than the peers.
Same arguments and ``READY <base_url>`` line as ``python -m tests.support.model_server``.
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import model_server

ThreadingHTTPServer.request_queue_size = 1024

if __name__ == "__main__":
    model_server.main(sys.argv[1:])
