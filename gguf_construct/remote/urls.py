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
from urllib.parse import quote

from .. import rules

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
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(url).path)


def is_remote(source: object) -> bool:
    return scheme_of(source) is not None


def hf_url(source: str) -> tuple[str, dict[str, str]]:
    """The resolve URL of an ``hf://`` name and its headers (the bearer token from ``HF_TOKEN``)."""
    m = _HF.match(source)
    if not m:
        raise rules.REMOTE_URL.error("expected hf://OWNER/REPO[@REVISION]/PATH", url=source)
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
    from ..formats.ollama import DEFAULT_HOST, DEFAULT_NAMESPACE, DEFAULT_TAG

    parts = source[len("ollama://") :].split("/")
    model, _, tag = parts[-1].partition(":")  # the registry may have a port: the tag is in the last part only
    parts[-1] = model
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise rules.REMOTE_URL.error("expected ollama://[REGISTRY/][NAMESPACE/]MODEL[:TAG]", url=source)
    host, namespace, model = [DEFAULT_HOST, DEFAULT_NAMESPACE][: 3 - len(parts)] + parts
    tag = tag or DEFAULT_TAG
    hostname = host.rsplit(":", 1)[0].strip("[]")
    insecure = os.environ.get("OLLAMA_INSECURE", "") not in ("", "0") or hostname == "localhost"
    with contextlib.suppress(ValueError):
        insecure = insecure or ipaddress.ip_address(hostname).is_loopback
    return OllamaName(f"{'http' if insecure else 'https'}://{host}", namespace, model, tag)
