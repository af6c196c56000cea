"""A TCP proxy between a driver and the Postgres server that a test can cut and restore: what
a driver sees when the server restarts (every connection dropped, new ones refused) without
touching the shared server."""

from __future__ import annotations

import socket
import threading


class PgProxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.cuts = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Drop every connection; refuse new ones until `restore`."""
        self.cuts += 1
        self._drop()

    def restore(self) -> None:
        with self._lock:
            self.up = True

    def close(self) -> None:
        self._drop()
        _close(self.listener)

    def _drop(self) -> None:
        with self._lock:
            self.up = False
            for s in self._open:
                _close(s)
            self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if not self.up:
                    _close(client)
                    continue
                try:
                    server = socket.create_connection(self.upstream, timeout=5)
                except OSError:
                    _close(client)
                    continue
                server.settimeout(None)
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    _close(src)
    _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
