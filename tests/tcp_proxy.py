"""A small TCP proxy for fault tests (this kernel has no `tc netem`): it forwards loopback
connections to a server and can delay, throttle, reset or blackhole them on demand."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.delay = 0.0  # seconds added before each forwarded chunk
        self.rate: float | None = None  # bytes per second, None = unthrottled
        self.blackholed = False  # hold every byte: the peers see a silent link
        self.downstream = 0  # bytes forwarded server -> client, for "cut mid-FETCH" tests
        self.connections = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.socket()
                # a small receive buffer keeps a throttled transfer honest: the server cannot
                # hand its whole answer to the kernel before a fault is injected
                server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
                server.settimeout(5)
                server.connect(self.target)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while not self._closed:
                if self.blackholed:
                    time.sleep(0.02)
                    continue
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                data = src.recv(4096 if self.rate is None else max(1, int(min(4096, self.rate / 20))))
                if not data:
                    break
                while self.blackholed and not self._closed:
                    time.sleep(0.02)
                if self.delay:
                    time.sleep(self.delay)
                if self.rate:
                    time.sleep(len(data) / self.rate)
                dst.sendall(data)
                if down:
                    self.downstream += len(data)
        except (OSError, ValueError):  # ValueError: select() on a socket another thread closed (a cut)
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def reset(self) -> int:
        """RST every open connection (SO_LINGER 0): the client gets ConnectionResetError."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            for s in (client, server):
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()
                except OSError:
                    pass
        return len(pairs)

    def corrupt(self) -> int:
        """Send the clients a forged TLS record: their TLS layer fails with ssl.SSLError."""
        with self._lock:
            pairs = list(self._pairs)
        for client, _server in pairs:
            try:
                client.sendall(b"\x17\x03\x03\x00\x20" + os.urandom(32))
            except OSError:
                pass
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        # wake the thread blocked in accept(): a closed listener alone leaves it waiting, and it
        # took the next test's connection on the reused port and dropped it
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.reset()
