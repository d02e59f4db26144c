"""Self-contained HTML pages: a Jinja2 template with its stylesheet, its script, the vendored charting
library and the page's data all inlined, so the file opens from disk with no server and no network.

The vendored files (`assets/vendor/`, listed in `assets/vendor/MANIFEST.json` with their package,
version, licence and sha256) are copied unchanged from their npm packages; each page carries their
licence texts in a comment beside them."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

VENDOR_MANIFEST = "assets/vendor/MANIFEST.json"


class AssetError(RuntimeError):
    """A vendored file is missing or is not the one the manifest names."""


def _asset_text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(1)
def vendor_manifest() -> dict[str, dict]:
    return json.loads(_asset_text(VENDOR_MANIFEST))


@lru_cache(None)
def vendor_script(file: str) -> str:
    """One vendored script, checked against the manifest's sha256."""
    entry = vendor_manifest().get(file)
    if entry is None:
        raise AssetError(f"{file} is not in {VENDOR_MANIFEST}")
    text = _asset_text(f"assets/vendor/{file}")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if digest != entry["sha256"]:
        raise AssetError(
            f"assets/vendor/{file}: sha256 {digest[:16]}... is not the manifest's "
            f"{entry['sha256'][:16]}... ({entry['package']} {entry['version']})"
        )
    return text


def _licence_comment(files: list[str]) -> str:
    parts = []
    for f in files:
        e = vendor_manifest()[f]
        licence = _asset_text(f"assets/vendor/{e['licence_file']}").strip()
        parts.append(f"{e['package']} {e['version']} ({e['licence']}):\n{licence}")
    # the licence texts travel inside an HTML comment: nothing in them may close it early
    return "\n\n".join(parts).replace("--", "- -")


def _inline_script(text: str) -> str:
    """Script text safe inside <script>...</script> (a literal `</script` would end the element)."""
    return text.replace("</script", "<\\/script").replace("<!--", "<\\!--")


@lru_cache(1)
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader(__package__, "templates"),
        autoescape=select_autoescape(("html", "j2")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["inline_script"] = _inline_script
    return env


def render_page(
    template: str, *, title: str, data: dict, vendor: list[str], scripts: list[str], styles: list[str], **context
) -> str:
    """The page: `template` (templates/) given `context`, with `data` as JSON, the vendored files
    `vendor` (in order), our own `scripts` and `styles` (assets/) inlined."""
    return (
        environment()
        .get_template(template)
        .render(
            title=title,
            data=data,
            vendor_js=[vendor_script(f) for f in vendor],
            vendor_licences=_licence_comment(vendor),
            own_js=[_asset_text(f"assets/{s}") for s in scripts],
            css="\n".join(_asset_text(f"assets/{s}") for s in styles),
            **context,
        )
    )


def write_page(path: Path, html: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
