"""Let lionagi count tokens offline with the o200k_base file composer vendors.

lionagi counts tokens with ``tiktoken.get_encoding("o200k_base")``, which downloads the rank
file on first use; without internet its token counting raises, so every context provider is
recorded as failed and the model call itself cannot be prepared. tiktoken looks in
``TIKTOKEN_CACHE_DIR`` first, under the SHA-1 of the download URL: writing composer's verified
copy there makes lionagi count exactly what composer counts, with no network.

This module does not import lionagi and changes no environment variable by itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from composer.tokens import vendored_o200k_base

__all__ = ["O200K_BASE_URL", "prime_tiktoken_cache"]

O200K_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def prime_tiktoken_cache(directory: str | Path) -> Path:
    """Write the vendored o200k_base into ``directory`` as tiktoken's cache entry; return its path.

    Point ``TIKTOKEN_CACHE_DIR`` at ``directory`` before lionagi first counts tokens. The file
    is checked against its published SHA-256 before it is written (tiktoken checks it again).
    """
    raw = vendored_o200k_base()
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(O200K_BASE_URL.encode()).hexdigest()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(raw)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return path
