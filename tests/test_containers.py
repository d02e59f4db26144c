import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import docker
import pytest

from kernelseek_suite import config
from kernelseek_suite.reproduce import containers
from kernelseek_suite.reproduce.lock import paths, read_lock
from kernelseek_suite.reproduce.pipeline import IMAGE_ENV, ReproduceRequest
from kernelseek_suite.reproduce.registry import RegistryError, parse_ref, resolve_digest

ROOT = config.REPO_ROOT
DOCKERFILES = [containers.dockerfile(a) for a in sorted(config.REPRODUCE)]
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_from_is_pinned_by_tag_and_digest(path):
    bases = containers.base_images(path)
    assert bases, f"{path} has no FROM"
    for b in bases:
        assert b.image is not None
        assert b.pinned, f"{path}:{b.line}: FROM {b.ref} has no digest (kernelseek-suite container pin)"
        assert b.image.tag and b.image.tag != "latest", f"{path}:{b.line}: FROM {b.ref} names no tag"


@pytest.mark.parametrize("arch", sorted(config.REPRODUCE))
def test_labels_match_the_lock_and_the_base_image(arch):
    assert containers.label_problems(arch) == []
    lab = containers.labels(containers.dockerfile(arch))
    assert lab["io.kernelseek.arch"] == arch
    req_in, req_lock = paths(arch)
    pins = {p.name: p.version for p in read_lock(req_lock)}
    for want in read_lock(req_in):
        assert pins[want.name] == want.version
    assert all(p.hashes for p in read_lock(req_lock)), "every pin carries its sha256"
    assert "kernelseek-suite" not in pins


def test_a_label_that_disagrees_with_the_lock_is_found(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "containers", root / "containers")
    df = root / "containers" / "sm90" / "Dockerfile"
    df.write_text(df.read_text().replace('io.kernelseek.torch="2.11.0"', 'io.kernelseek.torch="2.9.0"'))
    problems = containers.label_problems("sm90", root)
    assert problems and "io.kernelseek.torch is '2.9.0', the lock pins 2.11.0" in problems[0]


def _hadolint(*paths):
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    return subprocess.run(
        [exe, "--config", str(ROOT / ".hadolint.yaml"), *map(str, paths)], capture_output=True, text=True
    )


def test_hadolint_passes_the_dockerfiles():
    p = _hadolint(*DOCKERFILES)
    assert p.returncode == 0, p.stdout + p.stderr


def test_hadolint_config_fails_on_real_problems(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        "FROM ubuntu:latest\nRUN apt-get update && apt-get install -y curl\nRUN cd /tmp && make\n"
        "RUN pip install requests\n"
    )
    p = _hadolint(bad)
    assert p.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3003", "DL3015"):  # latest tag, unpinned pip, cd, recommends
        assert rule in p.stdout


def test_unpinned_froms_and_stages(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text(
        f"FROM --platform=linux/amd64 nvidia/cuda:13.0.1-devel-ubuntu24.04@{DIGEST} AS build\n"
        "RUN true\nFROM build AS test\nFROM ubuntu:24.04\nFROM scratch\n"
    )
    bases = containers.base_images(df)
    assert [b.line for b in bases] == [1, 3, 4, 5]
    assert [b.ref for b in containers.unpinned(df)] == ["ubuntu:24.04"]
    assert bases[0].image.repository == "nvidia/cuda" and bases[0].stage == "build"
    assert bases[1].image is None and bases[3].image is None


def test_pin_fills_in_and_refreshes_digests(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text(f"FROM nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:{'0' * 64}\nFROM ubuntu:24.04 AS x\nFROM x\n")
    asked = []

    def resolve(ref):
        asked.append(ref)
        return DIGEST

    changes = containers.pin(df, resolve)
    assert asked == ["nvidia/cuda:13.0.1-devel-ubuntu24.04", "ubuntu:24.04"]
    assert len(changes) == 2
    text = df.read_text()
    assert f"FROM nvidia/cuda:13.0.1-devel-ubuntu24.04@{DIGEST}\n" in text
    assert f"FROM ubuntu:24.04@{DIGEST} AS x\n" in text
    assert containers.unpinned(df) == []
    assert containers.pin(df, resolve) == []  # already current: nothing rewritten


def test_parse_ref():
    r = parse_ref("nvidia/cuda:13.0.1-devel-ubuntu24.04@" + DIGEST)
    assert (r.registry, r.repository, r.tag, r.digest) == (
        "docker.io",
        "nvidia/cuda",
        "13.0.1-devel-ubuntu24.04",
        DIGEST,
    )
    assert r.api_host == "registry-1.docker.io"
    assert parse_ref("ubuntu").repository == "library/ubuntu" and parse_ref("ubuntu").tag == "latest"
    n = parse_ref("nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04")
    assert (n.registry, n.repository) == ("nvcr.io", "nvidia/cuda")
    assert n.with_digest(DIGEST) == "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04@" + DIGEST


class _Registry(BaseHTTPRequestHandler):
    """A registry on loopback that speaks the distribution protocol's token dance."""

    tags = {"nvidia/cuda": {"13.0.1-devel-ubuntu24.04": DIGEST}}

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.startswith("/token?"):
            assert "scope=repository%3Anvidia%2Fcuda%3Apull" in self.path
            body = json.dumps({"token": "tok-1"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def do_HEAD(self):
        port = self.server.server_address[1]
        if self.headers.get("Authorization") != "Bearer tok-1":
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate",
                f'Bearer realm="http://127.0.0.1:{port}/token",'
                'service="registry.test",scope="repository:nvidia/cuda:pull"',
            )
            self.end_headers()
            return
        assert "manifest.list.v2+json" in self.headers.get("Accept", "")
        _, _, repo_tag = self.path.partition("/v2/")
        repo, _, tag = repo_tag.partition("/manifests/")
        digest = self.tags.get(repo, {}).get(tag)
        self.send_response(200 if digest else 404)
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()


@pytest.fixture
def registry():
    srv = HTTPServer(("127.0.0.1", 0), _Registry)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_resolve_digest_over_http(registry):
    assert resolve_digest("nvidia/cuda:13.0.1-devel-ubuntu24.04", base_url=registry, timeout=5) == DIGEST
    with pytest.raises(RegistryError, match="does not exist"):
        resolve_digest("nvidia/cuda:9.9.9-gone", base_url=registry, timeout=5)
    with pytest.raises(RegistryError, match="cannot reach"):
        resolve_digest("nvidia/cuda:13.0.1", base_url="http://127.0.0.1:9", timeout=2)


# --- the Docker engine, through a stand-in for the SDK's client ---------------------------------


class FakeImage:
    id = "sha256:" + "cd" * 32
    attrs = {"RepoDigests": [], "Size": 12 * 2**30}
    labels = {"io.kernelseek.arch": "sm90"}


class FakeContainer:
    def __init__(self, out: Path, rc: int):
        self.out, self.rc, self.removed = out, rc, False

    def logs(self, stream, follow):
        assert stream and follow
        return iter([b"reproduce sm90 ...\n", b"done\n"])

    def wait(self):
        (self.out / "REPORT.md").write_text("# Results\n")  # what the run inside leaves behind
        return {"StatusCode": self.rc}

    def remove(self, force=False):
        self.removed = True


class FakeClient:
    def __init__(self, has_image=False, run_error=None, info=None, rc=0, out=None):
        self.built, self.runs, self.has_image, self.run_error, self.rc, self.out = [], [], has_image, run_error, rc, out
        self._info = info if info is not None else {"ServerVersion": "28.2", "Runtimes": {"runc": {}, "nvidia": {}}}
        client = self

        class Images:
            def get(self, tag):
                if not client.has_image:
                    raise docker.errors.ImageNotFound("no such image")
                return FakeImage()

            def build(self, **kw):
                client.built.append(kw)
                return FakeImage(), iter([{"stream": "Step 1/9 : FROM nvidia/cuda"}])

        class Containers:
            def run(self, image, command, **kw):
                if client.run_error:
                    raise docker.errors.APIError(client.run_error)
                client.runs.append((image, command, kw))
                client.container = FakeContainer(client.out, client.rc)
                return client.container

        self.images, self.containers = Images(), Containers()

    def ping(self):
        return True

    def info(self):
        return self._info


def test_run_in_container_builds_requests_the_gpu_and_mounts_results(tmp_path):
    out = tmp_path / "results" / "sm90"
    out.mkdir(parents=True)
    cli = FakeClient(out=out)
    req = ReproduceRequest(arch="sm90", runtime="docker", root=ROOT, out=out, gpu_index=1, seed=5)
    outcome = containers.run_in_container(req, cli=cli)
    assert outcome.exit_code == 0 and outcome.status == "measured" and outcome.runtime == "docker"
    # built from the architecture's Dockerfile with the checkout as context
    (build,) = cli.built
    assert build["dockerfile"] == "containers/sm90/Dockerfile" and Path(build["path"]) == ROOT
    assert build["tag"] == containers.image_tag("sm90") and build["tag"].startswith("kernelseek-suite:sm90-")
    image, command, kw = cli.runs[0]
    assert command[:5] == ["reproduce", "--arch", "sm90", "--runtime", "native"]
    assert command[command.index("--out") + 1] == "/opt/kernelseek-suite/results/sm90"
    assert "--seed" in command
    (dr,) = kw["device_requests"]
    assert dr["Capabilities"] == [["gpu"]] and dr["DeviceIDs"] == ["1"]
    assert kw["volumes"] == {str(out.parent.resolve()): {"bind": "/opt/kernelseek-suite/results", "mode": "rw"}}
    assert kw["network_mode"] == "none"
    uid = kw["user"].split(":")[0]
    assert uid == str(__import__("os").getuid())
    recorded = json.loads(kw["environment"][IMAGE_ENV])
    assert recorded["id"] == FakeImage.id and recorded["base"].startswith(
        "nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:"
    )
    assert recorded["built"] is True and recorded["size_bytes"] == 12 * 2**30
    assert cli.container.removed


def test_an_existing_image_is_reused(tmp_path):
    cli = FakeClient(has_image=True, out=tmp_path)
    info = containers.ensure_image(cli, "sm90", ROOT)
    assert cli.built == [] and info["built"] is False


def test_no_gpu_driver_in_docker_becomes_advice(tmp_path):
    cli = FakeClient(run_error='could not select device driver "" with capabilities: [[gpu]]', out=tmp_path)
    req = ReproduceRequest(arch="sm90", runtime="docker", root=ROOT, out=tmp_path / "r" / "sm90")
    with pytest.raises(containers.ContainerError) as e:
        containers.run_in_container(req, cli=cli)
    assert "NVIDIA Container Toolkit" in str(e.value) and "nvidia-ctk runtime configure" in str(e.value)


def test_docker_ready():
    assert containers.docker_ready(lambda: FakeClient()) == (True, "ok")
    ready, why = containers.docker_ready(lambda: FakeClient(info={"Runtimes": {"runc": {}}}))
    assert not ready and "NVIDIA Container Toolkit" in why

    def no_engine():
        raise docker.errors.DockerException(
            "Error while fetching server API version: ('Connection aborted.', "
            "FileNotFoundError(2, 'No such file or directory'))"
        )

    ready, why = containers.docker_ready(no_engine)
    assert not ready and "not reachable" in why and "systemctl start docker" in why


def test_image_tag_follows_the_content(tmp_path):
    root = tmp_path / "repo"
    (root / "containers" / "sm90").mkdir(parents=True)
    (root / "suite").mkdir()
    (root / "suite" / "a.py").write_text("x = 1\n")
    (root / "pyproject.toml").write_text("")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    first = containers.image_tag("sm90", root)
    assert containers.image_tag("sm90", root) == first
    (root / "results").mkdir()
    (root / "results" / "x.json").write_text("{}")  # results are not part of the image
    assert containers.image_tag("sm90", root) == first
    (root / "suite" / "a.py").write_text("x = 2\n")
    assert containers.image_tag("sm90", root) != first
