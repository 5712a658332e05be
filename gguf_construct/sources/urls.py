"""Which sources are remote, and where ``hf://`` and ``ollama://`` names point.

- ``http(s)://...``: read by ranges as is.
- ``hf://[datasets/|spaces/]OWNER/REPO[@REV]/PATH``: ``{HF_ENDPOINT or https://huggingface.co}/[datasets/|spaces/]
  OWNER/REPO/resolve/{REV or main}/PATH``, with ``HF_TOKEN`` as a bearer token, as huggingface_hub does.
- ``ollama://[REGISTRY/][NAMESPACE/]MODEL[:TAG]``: the registry's manifest API (``/v2/{ns}/{model}/manifests/{tag}``,
  blobs at ``/v2/{ns}/{model}/blobs/{digest}``), registry.ollama.ai and ``library`` by default; https, except for a
  loopback registry or with ``OLLAMA_INSECURE=1`` (plain http, as ``ollama pull --insecure``).
- any other ``scheme://`` goes to fsspec when it is installed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import quote, unquote, urlparse

from ..core import rules

HF_DEFAULT_ENDPOINT = "https://huggingface.co"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_HF = re.compile(r"hf://(?:(?P<kind>datasets|spaces)/)?(?P<owner>[^/@]+)/(?P<repo>[^/@]+)(?:@(?P<rev>[^/]+))?/(?P<path>.+)\Z")


def scheme_of(source: object) -> str | None:
    """``'https'``, ``'hf'``, ``'ollama'``, ``'file'``, ``'s3'`` ... for a URL; None for a local path."""
    if not isinstance(source, str):
        return None
    m = _SCHEME.match(source)
    return m.group(1).lower() if m else None


def local_path(url: str) -> str:
    """The path of a ``file://`` URL."""
    return unquote(urlparse(url).path)


def is_remote(source: object) -> bool:
    return scheme_of(source) is not None


#: an owner or repository name on the Hub (huggingface_hub's ``validate_repo_id``, ASCII only, at most 96)
_HF_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}\Z")
#: what a revision or a path may not hold: a percent-encoded dot, slash or backslash (a server decodes them into
#: a separator or a dot segment after our checks), a backslash, a control character
_HF_FORBIDDEN = re.compile(r"%(?:2e|2f|5c)|[\\\x00-\x1f\x7f]", re.IGNORECASE)


def _refuse(source: str, what: str) -> NoReturn:
    raise rules.REMOTE_NAME.error(f"{what}: refused before any URL is built", url=source)


def _check_hf(source: str, owner: str, repo: str, rev: str | None, path: str) -> None:
    """Every part of an ``hf://`` name stays inside its repository: owner and repository by the Hub's grammar (no
    ``..``), no dot segment or empty segment in the path, no percent-encoded separator or dot anywhere."""
    for what, name in (("owner", owner), ("repository", repo)):
        if not _HF_NAME.match(name) or ".." in name or "--" in name:
            _refuse(source, f"the {what} {name[:40]!r} is not a Hub name (letters, digits, '_', '-', '.'; no '..' or '--')")
    if rev is not None and (rev in (".", "..") or ".." in rev or _HF_FORBIDDEN.search(rev)):
        _refuse(source, f"the revision {rev[:40]!r} holds a dot segment or an encoded separator")
    if _HF_FORBIDDEN.search(path):
        _refuse(source, "the path holds a percent-encoded dot or separator, a backslash or a control character")
    if any(part in ("", ".", "..") for part in path.split("/")):
        _refuse(source, "the path holds a '.' or '..' segment or an empty one")


def hf_url(source: str) -> tuple[str, dict[str, str]]:
    """The resolve URL of an ``hf://`` name and its headers (the bearer token from ``HF_TOKEN``)."""
    m = _HF.match(source)
    if not m:
        raise rules.REMOTE_URL.error("expected hf://OWNER/REPO[@REVISION]/PATH", url=source)
    _check_hf(source, m.group("owner"), m.group("repo"), m.group("rev"), m.group("path"))
    endpoint = (os.environ.get("HF_ENDPOINT") or HF_DEFAULT_ENDPOINT).rstrip("/")
    kind = f"{m.group('kind')}/" if m.group("kind") else ""
    rev = quote(m.group("rev") or "main", safe="")
    url = f"{endpoint}/{kind}{m.group('owner')}/{m.group('repo')}/resolve/{rev}/{quote(m.group('path'), safe='/')}"
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    return url, ({"Authorization": f"Bearer {token}"} if token else {})


@dataclass(frozen=True)
class OllamaName:
    """A model in an Ollama registry, and the URLs of its manifest and blobs."""

    base: str  # scheme://registry
    namespace: str
    model: str
    tag: str

    @property
    def manifest_url(self) -> str:
        return f"{self.base}/v2/{self.namespace}/{self.model}/manifests/{self.tag}"

    def blob_url(self, digest: str) -> str:
        return f"{self.base}/v2/{self.namespace}/{self.model}/blobs/{digest}"


def ollama_name(source: str) -> OllamaName:
    """``ollama://[REGISTRY/][NAMESPACE/]MODEL[:TAG]`` with Ollama's defaults."""
    from ..formats.ollama.schema import split_name

    rest = source[len("ollama://") :]
    if not 1 <= len(rest.split("/")) <= 3 or not all(rest.split("/")) or rest.endswith(":"):
        raise rules.REMOTE_URL.error("expected ollama://[REGISTRY/][NAMESPACE/]MODEL[:TAG]", url=source)
    try:
        host, namespace, model, tag = split_name(rest)
    except ValueError as e:
        _refuse(source, str(e))
    hostname = host.rsplit(":", 1)[0].strip("[]")
    insecure = os.environ.get("OLLAMA_INSECURE", "") not in ("", "0") or hostname == "localhost"
    with contextlib.suppress(ValueError):
        insecure = insecure or ipaddress.ip_address(hostname).is_loopback
    return OllamaName(f"{'http' if insecure else 'https'}://{host}", namespace, model, tag)
