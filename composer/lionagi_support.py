"""Let lionagi count tokens offline with the o200k_base file composer vendors.

lionagi counts tokens with ``tiktoken.get_encoding("o200k_base")``, which downloads the rank
file on first use; without internet its token counting raises, so every context provider is
recorded as failed and the model call itself cannot be prepared. tiktoken looks in
``TIKTOKEN_CACHE_DIR`` first, under the SHA-1 of the download URL: writing composer's verified
copy there makes lionagi count exactly what composer counts, with no network.

This module does not import lionagi and changes no environment variable by itself.
"""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources
from pathlib import Path

from composer.errors import TokenizerError
from composer.tokens import O200K_BASE_SHA256

__all__ = ["O200K_BASE_URL", "prime_tiktoken_cache"]

O200K_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def prime_tiktoken_cache(directory: str | Path) -> Path:
    """Write the vendored o200k_base into ``directory`` as tiktoken's cache entry; return its path.

    Point ``TIKTOKEN_CACHE_DIR`` at ``directory`` before lionagi first counts tokens. The file
    is checked against its published SHA-256 before it is written (tiktoken checks it again).
    """
    raw = gzip.decompress(
        resources.files("composer._data").joinpath("o200k_base.tiktoken.gz").read_bytes()
    )
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_BASE_SHA256:
        raise TokenizerError(f"vendored o200k_base has SHA-256 {digest}; reinstall composer")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(O200K_BASE_URL.encode()).hexdigest()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(raw)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return path
