"""Resolve an image tag to its digest over the registry's HTTP API (the OCI distribution protocol:
an anonymous bearer token, then the manifest's `Docker-Content-Digest`), for Docker Hub and nvcr.io
alike. The digest is the manifest list's (index's), so it pins every platform of the tag."""

from __future__ import annotations

import re
from dataclasses import dataclass

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
DOCKER_HUB = "registry-1.docker.io"


class RegistryError(RuntimeError):
    pass


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host as written ("docker.io" when none is)
    repository: str  # e.g. "nvidia/cuda" ("library/ubuntu" for official images on Docker Hub)
    tag: str
    digest: str | None = None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB if self.registry == "docker.io" else self.registry

    def with_digest(self, digest: str) -> str:
        name = self.repository.removeprefix("library/") if self.registry == "docker.io" else self.repository
        prefix = "" if self.registry == "docker.io" else self.registry + "/"
        return f"{prefix}{name}:{self.tag}@{digest}"


def parse_ref(ref: str) -> ImageRef:
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", ref
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
    else:
        tag = "latest"
    if registry == "docker.io" and "/" not in path:
        path = "library/" + path
    return ImageRef(registry, path, tag, digest)


def _bearer_token(session, challenge: str, repository: str, timeout: float) -> str:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        raise RegistryError(f"the registry asked for authentication it did not describe: {challenge!r}")
    params.setdefault("scope", f"repository:{repository}:pull")
    r = session.get(realm, params=params, timeout=timeout)
    if r.status_code != 200:
        raise RegistryError(f"token request to {realm} failed with HTTP {r.status_code}")
    body = r.json()
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError(f"no token in the answer of {realm}")
    return token


def resolve_digest(ref: str | ImageRef, base_url: str | None = None, timeout: float = 20, session=None) -> str:
    """The digest the tag points to now. `base_url` replaces https://<registry host> (tests use a
    registry on loopback)."""
    import requests  # comes with the Docker SDK ([docker] extra)

    img = parse_ref(ref) if isinstance(ref, str) else ref
    s = session or requests.Session()
    url = f"{base_url or 'https://' + img.api_host}/v2/{img.repository}/manifests/{img.tag}"
    headers = {"Accept": ACCEPT}
    try:
        r = s.head(url, headers=headers, timeout=timeout)
        if r.status_code == 401 and "bearer" in r.headers.get("WWW-Authenticate", "").lower():
            headers["Authorization"] = "Bearer " + _bearer_token(
                s, r.headers["WWW-Authenticate"], img.repository, timeout
            )
            r = s.head(url, headers=headers, timeout=timeout)
    except requests.RequestException as e:
        raise RegistryError(f"cannot reach {img.api_host}: {type(e).__name__}: {e}") from e
    if r.status_code == 404:
        raise RegistryError(
            f"{img.repository}:{img.tag} does not exist on {img.api_host} (NVIDIA removes old tags; pick a current one)"
        )
    if r.status_code != 200:
        raise RegistryError(f"{img.api_host} answered HTTP {r.status_code} for {img.repository}:{img.tag}")
    digest = r.headers.get("Docker-Content-Digest", "")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise RegistryError(f"{img.api_host} gave no digest for {img.repository}:{img.tag}")
    return digest
