"""Content digests for the caches and fingerprints: 256-bit BLAKE2b, hex.

From CPython's built-in _blake2 module: `import hashlib` also loads OpenSSL's libcrypto, which
was a fortieth of a cached run's start-up, and the caches need nothing else from it."""
from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:             # an interpreter built without it
    from hashlib import blake2b


def hasher(data: bytes = b""):
    """An incremental digest (update(), hexdigest()) of 32 bytes."""
    return blake2b(data, digest_size=32)


def hexdigest(data: bytes) -> str:
    """64 hex digits of `data`'s digest."""
    return hasher(data).hexdigest()
