"""Payload codecs: how payloads, results and step records are stored at rest.

A codec turns the JSON text durq produces into the text stored in the database and back.
:class:`Encrypted` seals each value with AES-256-GCM (the ``cryptography`` package, extra
``durq[crypto]``) under a key id stored with it: ``durq:enc:v1:<key id>:<base64 of nonce +
ciphertext + tag>``. Several keys allow rotation: the first encrypts, every one decrypts, and
a value without the ``durq:enc:`` prefix is read as plain JSON (jobs stored before
encryption was turned on). docs/features/encryption.md.

What stays in clear: the task name, queue, key, tags, meta, error messages and tracebacks,
progress, and every time and state column.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from durq.errors import ConfigError, DurqError

PREFIX = "durq:enc:v1:"

#: The environment variable the CLI reads keys from: ``id=base64key,id2=base64key``.
KEYS_ENV = "DURQ_KEYS"


class _Nonces:
    """Random 96-bit nonces cut from ``os.urandom`` reads of :data:`BATCH` of them, one
    buffer per thread.

    ``os.urandom`` drops the GIL for its system call; once per value, it handed the GIL
    to another thread of a busy worker and the job's thread then waited for it back (the
    encrypted drain ran at ~60 % of the plain one at ~90 % of its instructions). A lock
    around one shared buffer did the same whenever two threads met at it; a buffer per
    thread needs none. The bytes are the same kernel randomness, each used once; a forked
    child drops every buffer (``os.register_at_fork``), so two processes never share one.
    """

    BATCH = 256

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._local = threading.local()

    def take(self) -> bytes:
        local = self._local
        at = getattr(local, "at", None)
        if at is None or at >= len(local.buffer):
            local.buffer, at = os.urandom(12 * self.BATCH), 0
        local.at = at + 12
        return bytes(local.buffer[at : at + 12])


_NONCES = _Nonces()
os.register_at_fork(after_in_child=_NONCES.reset)


class UndecodableValue(DurqError):
    """A stored value this codec cannot read (its key is missing, or it was tampered with)."""


class Codec(Protocol):
    """Turns JSON text into stored text and back."""

    def encode(self, text: str) -> str:
        """The stored form of ``text`` (JSON)."""
        ...

    def decode(self, stored: str) -> str:
        """The JSON text of a stored value.

        Raises:
            UndecodableValue: it cannot be read (missing key, damaged ciphertext).
        """
        ...


def sealed_key(stored: str | None) -> str | None:
    """The key id of an encrypted stored value, or None when it is plain (or not text: a
    damaged row's BLOB)."""
    if not isinstance(stored, str) or not stored.startswith(PREFIX):
        return None
    return stored[len(PREFIX) :].partition(":")[0]


def describe_sealed(stored: str) -> str:
    """What to show for a value that cannot be decoded here: ``encrypted (key k1)``."""
    return f"encrypted (key {sealed_key(stored)})"


class Encrypted:
    """AES-256-GCM at rest with key ids and rotation.

    Args:
        keys: ``(key_id, key)`` pairs, the first encrypts, all decrypt. A key is 32 bytes
            (AES-256), or their URL-safe base64 text; a key id is 1 to 64 characters
            without ``:``. Generate one with :meth:`generate_key`.

    Each value gets a fresh random 96-bit nonce (NIST SP 800-38D, 8.2.2); the key id is
    authenticated as associated data, so a value cannot be moved to another key's id.

    Raises:
        ConfigError: no keys, a bad key id or key, a duplicate id, or ``cryptography`` is
            not installed (``pip install 'durq[crypto]'``).
    """

    def __init__(self, keys: Sequence[tuple[str, bytes | str]]) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - the extra is installed in CI
            raise ConfigError(
                "durq.codecs.Encrypted needs the cryptography package: pip install 'durq[crypto]'"
            ) from None
        if not keys:
            raise ConfigError("Encrypted needs at least one (key_id, key) pair")
        self._ciphers: dict[str, AESGCM] = {}
        for key_id, key in keys:
            if not isinstance(key_id, str) or not 0 < len(key_id) <= 64 or ":" in key_id:
                raise ConfigError(f"a key id is 1 to 64 characters without ':', not {key_id!r}")
            if key_id in self._ciphers:
                raise ConfigError(f"key id {key_id!r} is given twice")
            self._ciphers[key_id] = AESGCM(_key_bytes(key_id, key))
        self.active = keys[0][0]
        # per value, only the nonce and the AEAD call: the rest is worked out once here
        from cryptography.exceptions import InvalidTag

        self._invalid_tag = InvalidTag
        self._seal = self._ciphers[self.active].encrypt
        self._active_ad = self.active.encode()
        self._active_prefix = f"{PREFIX}{self.active}:"

    @staticmethod
    def generate_key() -> str:
        """A new random 256-bit key as URL-safe base64 text."""
        return base64.urlsafe_b64encode(os.urandom(32)).decode()

    @classmethod
    def from_env(cls, value: str | None = None) -> Encrypted | None:
        """The codec for ``$DURQ_KEYS`` (``id=base64key,...``, first encrypts), or None.

        Raises:
            ConfigError: a malformed entry.
        """
        text = os.environ.get(KEYS_ENV) if value is None else value
        if not text:
            return None
        pairs: list[tuple[str, bytes | str]] = []
        for item in text.split(","):
            key_id, sep, key = item.strip().partition("=")
            if not sep:
                raise ConfigError(f"{KEYS_ENV} takes id=base64key,..., not {item!r}")
            pairs.append((key_id, key))
        return cls(pairs)

    @property
    def prefix(self) -> str:
        """The start of every value this codec encrypts now (its active key's)."""
        return f"{PREFIX}{self.active}:"

    def encode(self, text: str) -> str:
        nonce = _NONCES.take()
        sealed = self._seal(nonce, text.encode("utf-8", "surrogatepass"), self._active_ad)
        return self._active_prefix + binascii.b2a_base64(nonce + sealed, newline=False).decode()

    def decode(self, stored: str) -> str:
        key_id = sealed_key(stored)
        if key_id is None:
            return stored  # stored before encryption was turned on
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UndecodableValue(
                f"key {key_id} unavailable: the value was encrypted with key id {key_id!r}, "
                f"which this process does not have (it has {sorted(self._ciphers)})"
            )
        body = stored[len(PREFIX) + len(key_id) + 1 :]
        try:  # strict: what b64decode(validate=True) accepts, without its regular expression
            raw = binascii.a2b_base64(body, strict_mode=True)
            plain = cipher.decrypt(raw[:12], raw[12:], key_id.encode())
        except (binascii.Error, ValueError, self._invalid_tag):
            raise UndecodableValue(
                f"a value under key {key_id!r} does not decrypt (damaged or tampered with)"
            ) from None
        return plain.decode("utf-8", "surrogatepass")


def reseal_with(codec: Encrypted) -> Callable[[str], str]:
    """Old stored text -> the same value under ``codec``'s active key (for dq.reencrypt).

    Raises:
        UndecodableValue: a value under a key ``codec`` does not have.
    """
    return lambda stored: codec.encode(codec.decode(stored))


def _key_bytes(key_id: str, key: bytes | str) -> bytes:
    if isinstance(key, str):
        try:
            key = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        except (binascii.Error, ValueError):
            raise ConfigError(f"key {key_id!r} is not base64 text") from None
    if not isinstance(key, bytes) or len(key) != 32:
        raise ConfigError(f"key {key_id!r} must be 32 bytes (AES-256)")
    return key


def encode_with(codec: Codec | None, text: str) -> str:
    """``text`` as stored under ``codec`` (unchanged without one)."""
    return text if codec is None else codec.encode(text)


def nul_problem(what: str, stored: str | None, holds_nul: bool) -> str | None:
    """Why ``stored`` (``what``: a payload, a result, a step record, as the app's codec
    stored it) cannot go into a database whose text columns hold no NUL character
    (``holds_nul`` False: PostgreSQL), or None. durq's own JSON escapes NUL (``\\u0000``);
    only a codec's ``encode`` can return one. One scan of the text, only when it matters."""
    if holds_nul or stored is None or "\x00" not in stored:
        return None
    at = stored.index("\x00")
    return (
        f"{what} holds a NUL character (character {at} of the text the app's codec "
        "returned), which PostgreSQL cannot store"
    )


def decode_with(codec: Codec | None, stored: str) -> str:
    """The JSON text of ``stored`` under ``codec``.

    Raises:
        UndecodableValue: encrypted and no codec, or the codec cannot read it; or not text
            at all (a damaged row: SQLite gives a BLOB as bytes).
    """
    if not isinstance(stored, str):
        raise UndecodableValue(f"the stored value is {type(stored).__name__}, not text")
    if codec is not None:
        return codec.decode(stored)
    if sealed_key(stored) is not None:
        raise UndecodableValue(
            f"{describe_sealed(stored)}: give the app codec=Encrypted(keys=...) "
            f"(the CLI reads ${KEYS_ENV})"
        )
    return stored
