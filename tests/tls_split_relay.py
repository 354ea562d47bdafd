"""A relay that makes a server's responses arrive cut in two, as a loaded machine delivers them.

pymap writes one IMAP response in several TLS records; when the records arrive apart, a client
reading a non-blocking TLS socket meets a line whose end is not there yet (oaken/sync/idle.py says
what that broke). A TCP proxy cannot cut the text a TLS record carries, so this relay speaks TLS to
the client itself: it forwards the plaintext session to the server's port in the clear, answers the
client's STARTTLS with the server's own certificate (which the client trusts through ca_file), and
from then on sends each chunk the server writes as two TLS records, cut in the middle of its last
line, `pause` seconds apart.
"""

from __future__ import annotations

import re
import select
import socket
import ssl
import threading
import time
from pathlib import Path

_STARTTLS = re.compile(rb"^(\S+) STARTTLS\r\n$", re.IGNORECASE)


class TlsSplitRelay:
    def __init__(self, server_port: int, cert: Path, key: Path, *, pause: float = 0.25):
        self.server_port = server_port
        self.pause = pause
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(cert), str(key))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.cuts = 0  # chunks sent cut in two, for the test to check it was exercised
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        try:  # wake the accept thread first: left blocked, it could take a connection meant for a
            self.listener.shutdown(socket.SHUT_RDWR)  # later listener given the same fd number
        except OSError:
            pass
        self.listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> TlsSplitRelay:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._closed:
                client.close()
                return
            server = socket.create_connection(("127.0.0.1", self.server_port), timeout=10)
            server.settimeout(None)
            self._socks += [client, server]
            threading.Thread(target=self._session, args=(client, server), daemon=True).start()

    def _session(self, client: socket.socket, server: socket.socket) -> None:
        try:
            tls = self._until_starttls(client, server)
            if tls is None:
                return
            self._socks.append(tls)
            threading.Thread(target=self._upstream, args=(tls, server), daemon=True).start()
            while chunk := server.recv(65536):
                self._send_cut(tls, chunk)
        except (OSError, ssl.SSLError):
            pass
        finally:
            for s in (client, server):
                try:
                    s.close()
                except OSError:
                    pass

    def _until_starttls(self, client: socket.socket, server: socket.socket) -> ssl.SSLSocket | None:
        """Relay in the clear until the client asks for STARTTLS; answer it here and shake hands."""
        pending = b""
        while True:
            ready, _, _ = select.select([client, server], [], [], 30)
            if not ready:
                return None
            if server in ready:
                data = server.recv(65536)
                if not data:
                    return None
                client.sendall(data)
            if client in ready:
                data = client.recv(65536)
                if not data:
                    return None
                pending += data
                while b"\r\n" in pending:
                    line, pending = pending.split(b"\r\n", 1)
                    m = _STARTTLS.match(line + b"\r\n")
                    if m is None:
                        server.sendall(line + b"\r\n")
                        continue
                    client.sendall(m.group(1) + b" OK Begin TLS negotiation now.\r\n")
                    return self.ctx.wrap_socket(client, server_side=True)

    def _upstream(self, tls: ssl.SSLSocket, server: socket.socket) -> None:
        try:
            while data := tls.recv(65536):
                server.sendall(data)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                server.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _send_cut(self, tls: ssl.SSLSocket, chunk: bytes) -> None:
        """Two TLS records: up to the middle of the chunk's last line, then the rest."""
        start = chunk.rstrip(b"\r\n").rfind(b"\r\n") + 2 if b"\r\n" in chunk.rstrip(b"\r\n") else 0
        cut = start + max(1, (len(chunk.rstrip(b"\r\n")) - start) // 2)
        if cut >= len(chunk):
            tls.sendall(chunk)
            return
        tls.sendall(chunk[:cut])
        time.sleep(self.pause)
        tls.sendall(chunk[cut:])
        self.cuts += 1
