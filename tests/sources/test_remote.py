"""Remote sources: GGUF, safetensors, legacy files and Ollama models over HTTP range requests from a loopback
server (``http_testserver``), with its faults; hf:// and ollama:// names; sharded sets; scan.

Every server runs on 127.0.0.1 and is stopped by its fixture; timeouts and retries are set small so that no
test can hang."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_file, corpus_files
from http_testserver import TestServer

import gguf_construct as gc
from gguf_construct.api.registry import load_url, validate_url
from gguf_construct.cli.main import main
from gguf_construct.errors import FormatError, RangeNotSupportedError, RemoteChangedError, RemoteError, RemoteLimitError
from gguf_construct.sources import configure
from gguf_construct.sources.opening import open_source

FAST = {"retries": 2, "backoff": 0.01, "connect_timeout": 5.0, "read_timeout": 10.0, "request_deadline": 30.0, "max_retry_after": 0.2}


@pytest.fixture(autouse=True)
def fast_options():
    previous = configure(**FAST)
    yield
    configure(previous)


@pytest.fixture
def server():
    with TestServer() as s:
        yield s


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def big_gguf(path: Path, *, vocab: int = 20000, rows: int = 256) -> Path:
    """A GGUF file with a large header (a vocabulary) and several MiB of tensor data."""
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["general.name"] = "remote test"
    f.metadata["tokenizer.ggml.tokens"] = [f"token-{i:06d}" for i in range(vocab)]
    rng = np.random.default_rng(0)
    for i in range(4):
        f.tensors.add(f"blk.{i}.weight", rng.standard_normal((rows, 1024)).astype(np.float32))
    f.tensors.add("output.weight", rng.standard_normal((8, 64)).astype(np.float16))
    f.save(path)
    return path


def info_of(source: str) -> dict:
    code, out, err = cli("info", "--json", source)
    doc = json.loads(out)
    assert code == (1 if doc["summary"]["errors"] else 0), err  # 1: a file cut short (ggml-writer-align64-inconsistent)
    return doc


# -- the same answers as for local files ------------------------------------------------------------------
REMOTE_CORPUS = [
    *corpus_files("gguf/*.gguf"),
    *corpus_files("generated/*.gguf"),
    *(p for p in corpus_files("legacy/*.bin") if "not-a-model" not in p.name),
    *corpus_files("rwkv/*FP16.bin"),
]
BAD_CORPUS = [*corpus_files("corrupt/*"), *corpus_files("legacy/not-a-model-*.bin")]


@pytest.mark.parametrize("path", REMOTE_CORPUS, ids=lambda p: p.name)
def test_remote_info_equals_local(server, path):
    url = server.add(f"/files/{path.name}", path.read_bytes())
    assert info_of(url) == info_of(str(path))
    if path.suffix == ".gguf":
        assert server.counts.bytes <= path.stat().st_size  # nothing is fetched twice


@pytest.mark.parametrize("path", BAD_CORPUS, ids=lambda p: p.name)
def test_remote_errors_equal_local(server, path):
    """A bad file gives the same one-line error over HTTP as on disk (exit 1, no traceback)."""
    url = server.add(f"/bad/{path.name}", path.read_bytes())
    remote, local = cli("info", url), cli("info", str(path))
    assert remote[0] == local[0] == 1
    assert remote[2].replace(url, "F") == local[2].replace(str(path), "F")


def test_file_urls_are_local_files(tmp_path):
    path = big_gguf(tmp_path / "m.gguf", vocab=10, rows=8)
    assert info_of(path.as_uri()) == info_of(str(path))
    assert isinstance(open_source(path.as_uri()).view(), memoryview)


def test_header_open_fetches_header_plus_one_chunk(server, tmp_path):
    path = big_gguf(tmp_path / "big.gguf")
    url = server.add("/big.gguf", path.read_bytes())
    f = gc.load(url)
    local = gc.load(path)
    size = path.stat().st_size
    assert f.data_offset == local.data_offset > 200_000
    chunk = gc.sources.options().max_chunk
    assert server.counts.bytes <= f.data_offset + chunk
    assert server.counts.bytes < size / 2  # the tensor data (4 MiB) was not fetched
    assert server.counts.requests <= 6
    assert list(f.metadata["tokenizer.ggml.tokens"][-3:]) == list(local.metadata["tokenizer.ggml.tokens"][-3:])


def test_one_tensor_fetches_its_range_only(server, tmp_path):
    path = big_gguf(tmp_path / "big.gguf")
    url = server.add("/big.gguf", path.read_bytes())
    f, local = gc.load(url), gc.load(path)
    server.reset_counts()
    t = f.tensors["blk.2.weight"]
    assert np.array_equal(t.to_numpy(), local.tensors["blk.2.weight"].to_numpy())
    assert t.nbytes <= server.counts.bytes <= t.nbytes + gc.sources.options().first_chunk
    assert server.counts.requests == 1
    t.to_numpy()  # cached: nothing more
    assert server.counts.requests == 1


def test_small_tensors_come_in_few_requests(server, tmp_path):
    f = gc.new()
    for i in range(64):
        f.tensors.add(f"norm.{i}", np.full(1024, i, np.float32))  # 4 KiB each
    f.tensors.add("big", np.zeros((256, 1024), np.float32))
    f.save(tmp_path / "m.gguf")
    url = server.add("/m.gguf", (tmp_path / "m.gguf").read_bytes())
    remote = gc.load(url)
    server.reset_counts()
    assert all(np.array_equal(remote.tensors[f"norm.{i}"].to_numpy(), np.full(1024, i, np.float32)) for i in range(64))
    assert server.counts.requests <= 2 and server.counts.bytes <= 64 * 4096 + gc.sources.options().first_chunk


def test_safetensors_header_and_tensor(server, tmp_path):
    from gguf_construct.api.safetensors_file import save_safetensors

    rng = np.random.default_rng(1)
    arrays = {f"layer.{i}": rng.standard_normal((512, 512)).astype(np.float32) for i in range(4)}
    path = tmp_path / "model.safetensors"
    save_safetensors(path, arrays, {"format": "pt"})
    url = server.add("/model.safetensors", path.read_bytes())
    f = gc.load(url)
    assert server.counts.bytes <= f.data_offset + gc.sources.options().first_chunk < path.stat().st_size
    server.reset_counts()
    assert np.array_equal(f.tensors["layer.2"].to_numpy(), arrays["layer.2"])
    assert server.counts.bytes == arrays["layer.2"].nbytes
    assert info_of(url) == info_of(str(path))
    assert f.to_bytes() == path.read_bytes()  # the rest is fetched first


def test_commands_on_urls(server, tmp_path):
    path = big_gguf(tmp_path / "big.gguf", vocab=100, rows=16)
    url = server.add("/big.gguf", path.read_bytes())
    assert cli("validate", url)[0] == 0
    assert cli("hash", url)[1].replace(url, "X") == cli("hash", str(path))[1].replace(str(path), "X")
    code, out, _ = cli("diff", url, str(path))
    assert code == 0, out
    assert cli("dequant", url, "--tensor", "blk.1.weight", str(tmp_path / "t.npy"))[0] == 0
    assert np.array_equal(np.load(tmp_path / "t.npy"), gc.load(path).tensors["blk.1.weight"].to_numpy())
    code, _, err = cli("convert", url, str(tmp_path / "be.gguf"), "--byte-order", "big")
    assert code == 0, err
    assert gc.load(tmp_path / "be.gguf").byte_order == "big"


# -- hf:// and ollama:// -------------------------------------------------------------------------------------------
def test_hf_names_use_endpoint_revision_and_token(server, tmp_path, monkeypatch):
    path = big_gguf(tmp_path / "m.gguf", vocab=50, rows=8)
    server.add("/owner/repo/resolve/v1.0/sub/m.gguf", path.read_bytes())
    server.add("/owner/repo/resolve/main/m.gguf", path.read_bytes())
    server.required["Authorization"] = "Bearer secret"
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(RemoteError) as e:
        gc.load("hf://owner/repo/m.gguf")
    assert e.value.status == 401 and "/owner/repo/resolve/main/m.gguf" in str(e.value)
    monkeypatch.setenv("HF_TOKEN", "secret")
    assert len(gc.load("hf://owner/repo@v1.0/sub/m.gguf").tensors) == 5
    assert info_of("hf://owner/repo/m.gguf")["tensors"] == info_of(str(path))["tensors"]
    monkeypatch.delenv("HF_TOKEN")
    code, out, _ = cli("--header", "Authorization: Bearer secret", "info", "--json", "hf://owner/repo/m.gguf")
    assert code == 0 and json.loads(out)["tensors"]
    server.add("/datasets/owner/data/resolve/main/m.gguf", path.read_bytes())
    code, out, _ = cli("info", "--json", "hf://datasets/owner/data/m.gguf", "--header", "Authorization: Bearer secret")
    assert code == 0 and json.loads(out)["tensors"]


def test_proxies_from_the_environment(server, tmp_path, monkeypatch):
    """HTTP_PROXY is honoured (the server plays the proxy for a host that does not exist); NO_PROXY and loopback
    hosts bypass it."""
    path = big_gguf(tmp_path / "m.gguf", vocab=50, rows=8)
    server.add("/m.gguf", path.read_bytes())
    monkeypatch.setenv("HTTP_PROXY", server.base)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    f = gc.load("http://models.invalid/m.gguf")
    assert server.counts.proxied == server.counts.requests >= 1
    assert np.array_equal(f.tensors["blk.0.weight"].to_numpy(), gc.load(path).tensors["blk.0.weight"].to_numpy())
    server.reset_counts()
    gc.load(server.url("/m.gguf"))
    assert server.counts.proxied == 0
    from gguf_construct.sources.http import proxy_for

    assert proxy_for("http://models.invalid/m.gguf") == server.base
    monkeypatch.setenv("NO_PROXY", "models.invalid")
    assert proxy_for("http://models.invalid/m.gguf") is None  # (not fetched: no lookup leaves the machine)


def serve_models_root(server: TestServer, root: Path, model: str) -> str:
    """Serve an Ollama models folder as a registry; returns the ollama:// name."""
    from gguf_construct.api.ollama_model import manifest_path

    manifest = manifest_path(root, model)
    server.add(f"/v2/library/{model.split(':')[0]}/manifests/{model.split(':')[1]}", manifest.read_bytes())
    for blob in (root / "blobs").iterdir():
        server.add(f"/v2/library/{model.split(':')[0]}/blobs/{blob.name.replace('sha256-', 'sha256:')}", blob.read_bytes())
    return f"ollama://127.0.0.1:{server.httpd.server_address[1]}/library/{model}"


def test_ollama_registry_model_written_by_our_writer(server, tmp_path):
    from gguf_construct.api.ollama_model import manifest_path, open_model
    from gguf_construct.convert import convert

    path = big_gguf(tmp_path / "m.gguf", vocab=50, rows=8)
    root = tmp_path / "models"
    convert(path, str(root) + "/", model="tiny:q")
    name = serve_models_root(server, root, "tiny:q")
    remote, local = gc.load(name), open_model(manifest_path(root, "tiny:q"))
    assert sorted(remote.tensors) == sorted(local.tensors)
    for n in local.tensors:
        assert np.array_equal(remote.tensors[n].to_numpy(), local.tensors[n].to_numpy())
    code, _, err = cli("validate", name)  # reads every blob whole and checks its sha256
    assert code == 0, err
    code, _, err = cli("convert", name, str(tmp_path / "back.gguf"))
    assert code == 0, err
    back = gc.load(tmp_path / "back.gguf")
    assert all(np.array_equal(back.tensors[n].to_numpy(), local.tensors[n].to_numpy()) for n in local.tensors)


def test_ollama_registry_gguf_blob_and_digest_check(server, tmp_path):
    from gguf_construct.formats.ollama.schema import Layer, Manifest

    path = big_gguf(tmp_path / "m.gguf", vocab=50, rows=64)  # 1 MiB of tensors: more than the first chunk
    data = path.read_bytes()
    import hashlib

    config = b'{"model_format":"gguf"}'
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    cdigest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = Manifest(
        Layer("application/vnd.docker.container.image.v1+json", cdigest, len(config)),
        (Layer("application/vnd.ollama.image.model", digest, len(data)),),
    )
    server.add("/v2/library/m/manifests/latest", manifest.to_bytes())
    server.add(f"/v2/library/m/blobs/{digest}", data)
    server.add(f"/v2/library/m/blobs/{cdigest}", config)
    name = f"ollama://127.0.0.1:{server.httpd.server_address[1]}/library/m"
    f = gc.load(name)
    assert f.format == "gguf" and info_of(name)["tensors"] == info_of(str(path))["tensors"]
    assert cli("validate", name)[0] == 0
    bad = bytearray(data)
    bad[-1] ^= 1  # same size, another digest
    server.add(f"/v2/library/m/blobs/{digest}", bytes(bad))
    code, out, _ = cli("validate", name)
    assert code == 1 and "blob.digest" in out
    f = gc.load(name)  # header only: nothing to check yet
    with pytest.raises(FormatError, match="blob.digest"):  # the local check's rule and class
        for t in f.tensors.values():
            t.to_numpy()  # the last byte in: the digest is checked
    with pytest.raises(FormatError, match="blob.digest"):
        f.tensors["blk.0.weight"].to_numpy()  # and stays failed


# -- faults ----------------------------------------------------------------------------------------------------
def small_url(server: TestServer, tmp_path: Path) -> tuple[str, Path]:
    path = big_gguf(tmp_path / "s.gguf", vocab=20000, rows=64)
    return server.add("/s.gguf", path.read_bytes()), path


def test_no_range_support_is_a_clear_error_or_a_download(server, tmp_path):
    url, path = small_url(server, tmp_path)
    server.faults.no_ranges = True
    with pytest.raises(RangeNotSupportedError) as e:
        gc.load(url)
    assert e.value.status == 200 and url in str(e.value)
    code, _, err = cli("info", url)
    assert code == 2 and "range requests" in err and "Traceback" not in err
    code, out, err = cli("--download", "info", "--json", url)
    assert code == 0, err
    assert json.loads(out)["tensors"] == info_of(str(path))["tensors"]


def test_retries_on_503_then_gives_up_with_the_status(server, tmp_path):
    url, path = small_url(server, tmp_path)
    server.faults.fail_next = 2
    assert len(gc.load(url).tensors) == 5
    server.faults.fail_next = 100
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.status == 503
    server.faults.fail_next, server.faults.retry_after = 2, "86400"  # "come back tomorrow": capped, not obeyed
    started = time.monotonic()
    assert len(gc.load(url).tensors) == 5
    assert time.monotonic() - started < 10


def test_dropped_connections_resume(server, tmp_path):
    url, path = small_url(server, tmp_path)
    f = gc.load(url)
    server.faults.drop_next = 2
    assert np.array_equal(f.tensors["blk.0.weight"].to_numpy(), gc.load(path).tensors["blk.0.weight"].to_numpy())
    server.faults.drop_next = 100
    with pytest.raises(RemoteError, match="broke off|ended after"):
        f.tensors["blk.3.weight"].to_numpy()  # (blk.1 came with blk.0's read-ahead)


def test_a_file_replaced_between_reads_is_an_error(server, tmp_path):
    url, path = small_url(server, tmp_path)
    f = gc.load(url)
    server.add("/s.gguf", big_gguf(tmp_path / "other.gguf", vocab=20000, rows=64).read_bytes()[::-1])
    with pytest.raises(RemoteChangedError):
        f.tensors["blk.3.weight"].to_numpy()
    server.faults.no_etag = True  # without an ETag the size still tells
    server.add("/s.gguf", path.read_bytes())
    f = gc.load(url)
    server.add("/s.gguf", path.read_bytes() + b"\0" * 64)
    with pytest.raises(RemoteChangedError):
        f.tensors["blk.3.weight"].to_numpy()


@pytest.mark.parametrize("content_range", ["bytes 5-10/100", "bytes */100", "nonsense", "bytes 0-10/*"])
def test_a_wrong_content_range_is_an_error(server, tmp_path, content_range):
    url, _ = small_url(server, tmp_path)
    server.faults.content_range = content_range
    with pytest.raises(RemoteError, match="Content-Range") as e:
        gc.load(url)
    assert e.value.status == 206 and e.value.url == url


def test_slow_server_times_out(server, tmp_path):
    url, _ = small_url(server, tmp_path)
    server.faults.delay = 1.0
    configure(read_timeout=0.2, retries=1)
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert time.monotonic() - started < 10
    assert e.value.url == url and "timed out" in str(e.value).lower()


def test_limits_statuses_and_redirects(server, tmp_path):
    url, path = small_url(server, tmp_path)
    with pytest.raises(RemoteError) as e:
        gc.load(server.url("/missing.gguf"))
    assert e.value.status == 404
    server.redirects["/loop"] = server.url("/loop")
    with pytest.raises(RemoteLimitError):
        gc.load(server.url("/loop"))
    server.redirects["/moved.gguf"] = url
    assert len(gc.load(server.url("/moved.gguf")).tensors) == 5
    configure(max_bytes=100_000)
    with pytest.raises(RemoteLimitError):
        gc.load(url)
    configure(max_bytes=None, max_header=64 * 1024)
    with pytest.raises(RemoteLimitError, match="header"):
        gc.load(url)
    configure(max_header=1 << 30)
    code, _, err = cli("info", "http://127.0.0.1:9/nothing.gguf")
    assert code == 2 and "remote.connection" in err and "Traceback" not in err


def test_corrupt_remote_file_gives_the_same_error_as_local(server):
    from gguf_construct.api.registry import validate_file

    for path in corpus_files("corrupt/*.gguf"):
        url = server.add(f"/c/{path.name}", path.read_bytes())
        assert [i.line() for i in validate_url(url)] == [i.line() for i in validate_file(path)], path.name


def test_checking_a_remote_tensor_against_the_protocol_fetches_nothing(server, tmp_path):
    """``isinstance(t, Tensor)`` looks the members up without running them (Python 3.11's runtime protocols
    ran every property, so the check fetched the tensor's data)."""
    from gguf_construct.api.protocol import ModelFile, Tensor

    path = big_gguf(tmp_path / "big.gguf", vocab=100)  # 4 MiB of tensor data, past the first read
    f = gc.load(server.add("/p/big.gguf", path.read_bytes()))
    server.reset_counts()
    assert isinstance(f, ModelFile) and all(isinstance(t, Tensor) for t in f.tensors.values())
    assert server.counts.requests == 0


def test_validate_url_checks_a_safetensors_header_without_its_data(server, tmp_path):
    """A safetensors source is judged on its header alone (the data is not fetched), with the same issues as the
    local file; a legacy file, checked whole, too."""
    from gguf_construct.api.registry import validate_file
    from gguf_construct.api.safetensors_file import save_safetensors

    path = tmp_path / "model.safetensors"
    save_safetensors(path, {"w": np.zeros((1024, 1024), np.float32)}, {"format": "pt"})  # 4 MiB, past the first read
    raw = path.read_bytes()
    header_end = 8 + int.from_bytes(raw[:8], "little")
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(raw[:header_end].replace(b'"F32"', b'"F33"') + raw[header_end:])
    for p in (path, broken):
        url = server.add(f"/v/{p.name}", p.read_bytes())
        server.reset_counts()
        assert [i.line() for i in validate_url(url)] == [i.line() for i in validate_file(p)], p.name
        assert server.counts.bytes < len(raw) // 2, p.name
    assert validate_file(broken)  # the comparison above is not between two empty lists
    legacy = corpus_file("legacy/ggmf-v1-llama-vocab.bin")
    url = server.add("/v/legacy.bin", legacy.read_bytes())
    assert [i.line() for i in validate_url(url)] == [i.line() for i in validate_file(legacy)]


def test_a_hostile_header_stops_early(server, tmp_path):
    """A string that claims more bytes than the file has: one more request at most, not the whole file."""
    from gguf_construct.errors import TruncatedError

    path = big_gguf(tmp_path / "big.gguf", vocab=100, rows=256)
    data = bytearray(path.read_bytes())
    at = data.index(b"general.name") + len(b"general.name") + 4  # the value's u64 length
    data[at : at + 8] = (len(data) * 2).to_bytes(8, "little")
    tmp_path.joinpath("bad.gguf").write_bytes(data)
    url = server.add("/bad.gguf", bytes(data))
    with pytest.raises(TruncatedError) as remote:
        gc.load(url)
    with pytest.raises(TruncatedError) as local:
        gc.load(tmp_path / "bad.gguf")
    assert remote.value.describe() == local.value.describe()
    assert server.counts.requests == 1 and server.counts.bytes <= gc.sources.options().first_chunk


# -- shards, fsspec -----------------------------------------------------------------------------------------------
def test_sharded_set_opens_from_the_first_url(server, tmp_path):
    from gguf_construct.api.shard_set import load_shards, split

    path = big_gguf(tmp_path / "m.gguf", vocab=100, rows=16)
    shards = split(gc.load(path), tmp_path / "model", max_tensors=2)
    assert len(shards) == 3
    for p in shards:
        server.add(f"/set/{p.name}", p.read_bytes())
    f = gc.load(server.url(f"/set/{shards[0].name}"))
    local = load_shards(shards[0])
    assert list(f.tensors) == list(local.tensors)
    assert np.array_equal(f.tensors["output.weight"].to_numpy(), local.tensors["output.weight"].to_numpy())
    assert info_of(server.url(f"/set/{shards[0].name}"))["tensors"] == info_of(str(shards[0]))["tensors"]
    server.files.pop(f"/set/{shards[2].name}")
    with pytest.raises(RemoteError) as e:
        gc.load(server.url(f"/set/{shards[0].name}"))
    assert e.value.status == 404


def test_fsspec_urls(tmp_path):
    fsspec = pytest.importorskip("fsspec")  # the test extra installs it
    path = big_gguf(tmp_path / "m.gguf", vocab=100, rows=16)
    with fsspec.open("memory://models/m.gguf", "wb") as f:
        f.write(path.read_bytes())
    src = open_source("memory://models/m.gguf")
    remote = load_url("memory://models/m.gguf")
    assert src.size == path.stat().st_size
    assert np.array_equal(remote.tensors["blk.0.weight"].to_numpy(), gc.load(path).tensors["blk.0.weight"].to_numpy())


# -- scan -------------------------------------------------------------------------------------------------------
def scan_files(server: TestServer, n: int) -> list[str]:
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.tensors.add("w", np.arange(16, dtype=np.float32))
    buf = tmp = None
    del buf, tmp
    urls = []
    for i in range(n):
        f.metadata["general.name"] = f"model {i}"
        out = io.BytesIO()
        from gguf_construct.formats.gguf.schema import GGUF

        GGUF.build_stream(f.to_container(), out)
        urls.append(server.add(f"/scan/m{i:04d}.gguf", out.getvalue()))
    urls.append(server.url("/scan/missing.gguf"))
    return urls


def read_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_scan_is_complete_and_resumable(server, tmp_path):
    urls = scan_files(server, 60)
    listing = tmp_path / "list.txt"
    listing.write_text("# sources\n" + "\n".join(urls) + "\n")
    out = tmp_path / "results.jsonl"
    code, _, err = cli("scan", str(listing), "--concurrency", "8", "--out", str(out))
    assert code == 2  # the missing one could not be read: trouble
    lines = read_lines(out)
    assert sorted(x["source"] for x in lines) == sorted(urls)
    bad = [x for x in lines if not x["ok"]]
    assert [x["source"] for x in bad] == [urls[-1]] and bad[0]["status"] == 404
    good = next(x for x in lines if x["source"] == urls[3])
    assert good["info"]["metadata"]["general.name"]["value"] == "model 3" and good["errors"] == 0
    # a killed scan: half the lines and a line cut short
    text = out.read_text().splitlines(keepends=True)
    out.write_text("".join(text[:25]) + text[25][:40])
    server.reset_counts()
    cli("scan", str(listing), "--concurrency", "8", "--out", str(out))
    lines = read_lines(out)
    assert sorted(x["source"] for x in lines) == sorted(urls)
    assert len({path for path, _ in server.counts.ranges}) == len(urls) - 25  # only the files not yet done
    cli("scan", *urls[:5], "--out", str(out))
    assert len(read_lines(out)) == len(urls)  # nothing twice


def test_scan_on_a_dask_local_cluster(server, tmp_path):
    """``scan --dask local``: a LocalCluster (threads, tcp on 127.0.0.1) in a subprocess, so that a cluster that
    fails to shut down cannot hang the suite (the subprocess has a timeout)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    pytest.importorskip("distributed")  # the cluster extra (in the test extra)
    urls = scan_files(server, 40)
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(urls) + "\n")
    out = tmp_path / "results.jsonl"
    cmd = [sys.executable, "-m", "gguf_construct.cli.main", "scan", str(listing), "--dask", "local", "--batch", "8", "--out", str(out)]
    run = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 2 and "41 scanned (40 ok, 0 invalid, 1 unreadable)" in run.stderr, run.stderr[-2000:]
    lines = read_lines(out)
    assert sorted(x["source"] for x in lines) == sorted(urls)  # every file once: none lost, no batch twice


def test_a_stalled_dask_scan_is_an_error_not_a_hang(server, tmp_path):
    """No batch finished within ``--dask-timeout``: exit 1 with a ``sources.dask_stalled`` line instead of the
    results the slow server would have given (the process still lets the one request in flight end before it exits)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    pytest.importorskip("distributed")
    urls = scan_files(server, 2)[:-1]
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(urls) + "\n")
    server.faults.delay = 12.0
    cmd = [
        sys.executable,
        "-m",
        "gguf_construct.cli.main",
        "scan",
        str(listing),
        "--dask",
        "local",
        "--dask-timeout",
        "2",
        "--out",
        str(tmp_path / "r.jsonl"),
    ]
    started = time.monotonic()
    try:
        run = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True, timeout=180)
    finally:
        server.faults.delay = 0.0
    assert run.returncode == 2 and "remote.dask_stalled" in run.stderr, run.stderr[-2000:]
    assert time.monotonic() - started < 60
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()  # nothing scanned


def test_a_killed_scan_resumes(server, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT

    urls = scan_files(server, 40)[:-1]
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(urls) + "\n")
    out = tmp_path / "results.jsonl"
    cmd = [sys.executable, "-m", "gguf_construct.cli.main", "scan", str(listing), "--concurrency", "2", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server.faults.delay = 0.02
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < 8):
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    written = out.read_bytes().count(b"\n")
    assert 8 <= written < len(urls)
    server.faults.delay = 0.0
    server.reset_counts()
    assert subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    lines = read_lines(out)
    assert sorted(x["source"] for x in lines) == sorted(urls)
    assert len({path for path, _ in server.counts.ranges}) == len(urls) - written  # only the files not yet done


def test_scan_records_a_crash_and_goes_on(server, tmp_path, monkeypatch):
    from gguf_construct.cli import scan_runner as scan_module

    urls = scan_files(server, 5)[:-1]
    real = scan_module._open_and_check

    def flaky(source, profile, opts):
        if source == urls[1]:
            raise TypeError("a bug")
        return real(source, profile, opts)

    monkeypatch.setattr(scan_module, "_open_and_check", flaky)
    out = tmp_path / "r.jsonl"
    counts = scan_module.scan(urls, out, concurrency=2)
    lines = {x["source"]: x for x in read_lines(out)}
    assert counts["scanned"] == 5 and counts["unreadable"] == 1
    assert lines[urls[1]]["rule"] == "internal.TypeError" and lines[urls[0]]["ok"]
