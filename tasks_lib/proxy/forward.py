"""Launcher run inside a sandbox in front of the agent's command: serve the model proxy on the
sandbox's own loopback, then become the command.

A sandbox without network still has a loopback interface of its own (bubblewrap's
``--unshare-net``, Docker's ``--network none``), and the proxy's Unix socket is bound into it.
This launcher listens on ``HOST:PORT`` of that loopback, forks a forwarder that copies every
connection to the socket, and ``exec``\\ s the command, so a plain OpenAI client inside
(``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1``) reaches the proxy and nothing else. The port is
listening before the command starts; the forwarder dies with the command (``PR_SET_PDEATHSIG``,
and the sandbox's PID namespace).

Standard library only, and nothing from medflows: it runs with the sandbox's interpreter, copied
beside the socket (``python forward.py HOST PORT SOCKET -- COMMAND...``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading

PR_SET_PDEATHSIG = 1
CHUNK = 65536


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until ``source`` ends, then end ``sink``'s writing side."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass  # the other side went away: the connection is over either way
    finally:
        with contextlib.suppress(OSError):  # already closed
            sink.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, target: str) -> None:
    """One connection: ``client`` ↔ a new connection to the Unix socket ``target``."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, target: str) -> None:
    """Accept connections forever, one relay thread each."""
    while True:
        client, _ = listener.accept()
        threading.Thread(target=relay, args=(client, target), daemon=True).start()


def die_with_parent(parent: int) -> None:
    """Be killed when the launching process (the command, after ``exec``) ends."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the command ended before the signal was armed
        os._exit(0)


def main(argv: list[str]) -> None:
    """``HOST PORT SOCKET -- COMMAND...``: listen, fork the forwarder, become the command."""
    if len(argv) < 5 or argv[3] != "--":
        sys.exit("usage: forward.py HOST PORT SOCKET -- COMMAND...")
    host, port, target, command = argv[0], int(argv[1]), argv[2], argv[4:]
    listener = socket.create_server((host, port))
    parent = os.getpid()
    if os.fork() == 0:
        die_with_parent(parent)
        quiet = os.open(os.devnull, os.O_RDWR)  # hold none of the command's pipes open
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        serve(listener, target)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
