"""A Noise transport session with the same wire bytes and far fewer copies and syscalls.

py-libp2p's `SecureSession` moves each byte of a bulk transfer through about six Python-level
copies on the way in (read-ahead slice, `read_exactly`'s bytearray and its `bytes()`, the
session's BytesIO drain, its bytearray and its `bytes()`) and sends every Noise message with
its own `send` on the way out: profiling a 50 MB blob fetch put most of the client's CPU in
that plumbing rather than in the cipher or the socket.

`FastNoiseSession` is a `SecureSession` built from the one the stock Noise handshake returns
(same peers, keys and cipher states) whose `read`/`write` work on the same transport
messages (u16 big-endian length || ChaCha20-Poly1305 ciphertext, plaintext <= 65 519 bytes):
- reads parse lengths and ciphertexts as views of one large raw read and decrypt from the
  view; `read(n)` joins plaintexts once;
- writes encrypt a whole yamux frame's messages and send them in one raw write.
Errors keep their types: a connection that ends mid-read raises `IncompleteReadError`
(clean close when nothing of the message had arrived), a bad tag `NoiseInvalidMessage`.
tests/p2p/test_noise_session.py checks it byte for byte against the stock session.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from libp2p.abc import IRawConnection
from libp2p.io.exceptions import IncompleteReadError
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH, NoiseTransportReadWriter
from libp2p.security.secure_session import SecureSession
from noise.exceptions import NoiseInvalidMessage
from noise.state import CipherState

READ_SIZE = 1024 * 1024  # raw bytes asked for per recv: 16 full Noise messages, one frame
LENGTH_BYTES = 2


class FastNoiseSession(SecureSession):
    """Drop-in for the stock Noise `SecureSession`; see the module docstring."""

    def __init__(self, session: SecureSession, raw: IRawConnection) -> None:
        conn = session.conn
        if not isinstance(conn, NoiseTransportReadWriter):
            raise TypeError(f"not a Noise transport session: {type(conn).__name__}")
        super().__init__(
            local_peer=session.local_peer,
            local_private_key=session.local_private_key,
            remote_peer=session.remote_peer,
            remote_permanent_pubkey=session.remote_permanent_pubkey,
            is_initiator=session.is_initiator,
            conn=conn,
        )
        protocol = conn.noise_state.noise_protocol
        self._decrypt: CipherState = protocol.cipher_state_decrypt
        self._encrypt: CipherState = protocol.cipher_state_encrypt
        self.raw = raw  # the connection the handshake ran on (and read ahead from)
        self._cipher = memoryview(b"")  # raw bytes read but not yet parsed
        self._plain = memoryview(b"")  # decrypted bytes not yet returned

    # -- reading -------------------------------------------------------------------------

    async def _raw_exactly(self, n: int, message_started: bool) -> memoryview:
        """`n` raw bytes: a view of the read buffer, or one join when they straddle reads."""
        if len(self._cipher) >= n:
            out, self._cipher = self._cipher[:n], self._cipher[n:]
            return out
        parts = [self._cipher]
        have = len(self._cipher)
        while True:
            chunk = memoryview(await self.raw.read(max(READ_SIZE, n - have)))
            if not chunk:  # clean close only between messages, as with the stock reader
                raise IncompleteReadError(
                    f"Noise connection closed: expected {n} bytes, received {have}",
                    expected_bytes=n,
                    received_bytes=have or int(message_started),
                )
            need = n - have
            if len(chunk) >= need:
                parts.append(chunk[:need])
                self._cipher = chunk[need:]
                return memoryview(b"".join(parts))
            parts.append(chunk)
            have += len(chunk)

    async def _next_message(self) -> memoryview:
        length = int.from_bytes(await self._raw_exactly(LENGTH_BYTES, False), "big")
        ciphertext = await self._raw_exactly(length, True)
        try:
            return memoryview(self._decrypt.decrypt_with_ad(None, ciphertext))  # type: ignore[arg-type]
        except InvalidTag as exc:
            raise NoiseInvalidMessage("Failed authentication of message") from exc

    async def read(self, n: int | None = None) -> bytes:
        """n None or negative: what one message holds; else exactly n bytes."""
        if n == 0:
            return b""
        if n is None or n < 0:
            if not self._plain:
                self._plain = await self._next_message()
            out, self._plain = self._plain, memoryview(b"")
            return bytes(out)  # (yamux always asks for n bytes; this path is not hot)
        if len(self._plain) >= n:
            out, self._plain = self._plain[:n], self._plain[n:]
            return bytes(out)
        parts = [self._plain]
        have = len(self._plain)
        while have < n:
            message = await self._next_message()
            need = n - have
            parts.append(message[:need])
            self._plain = message[need:]
            have += min(need, len(message))
        return b"".join(parts)

    # -- writing -------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Same messages as the stock writer (one per MAX_PLAINTEXT_LENGTH bytes, one empty
        message for empty data), sent with one raw write."""
        view = memoryview(data)
        pieces: list[bytes] = []
        for start in range(0, max(len(view), 1), MAX_PLAINTEXT_LENGTH):
            plaintext = view[start : start + MAX_PLAINTEXT_LENGTH]
            ciphertext = self._encrypt.encrypt_with_ad(None, plaintext)  # type: ignore[arg-type]
            pieces.append(len(ciphertext).to_bytes(LENGTH_BYTES, "big"))
            pieces.append(ciphertext)
        await self.raw.write(b"".join(pieces))
