"""Remote sources against a hostile server: shard sets that lie and fan out, the command's total budget, servers
that drip headers and bodies, header numbers too long or not ASCII, Ollama registries serving bad configs and
digests, credentials on redirects across ports, and hf:// / ollama:// names that leave their repository.

Every server is the loopback ``TestServer`` (its fault modes), stopped by its fixture; limits and timeouts are
small, so that each test ends in a few seconds."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from http_testserver import TestServer

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.core import rules
from gguf_construct.errors import FormatError, RemoteError
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.formats.ollama.schema import Layer, Manifest
from gguf_construct.sources import configure, options
from gguf_construct.sources.budget import Budget

FAST = {"retries": 1, "backoff": 0.01, "connect_timeout": 2.0, "read_timeout": 2.0, "request_deadline": 10.0, "max_retry_after": 0.1}


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


def expected_code(rule: str) -> int:
    """grep's contract: 2 for trouble (the network, a refused request), 1 for a file whose bytes break a rule."""
    return 2 if rules.rule(rule).fault == "request" else 1


def refused(argv: tuple[str, ...], rule: str) -> str:
    """The CLI exits with the rule's code (``expected_code``) with one line naming ``rule`` and no traceback;
    returns stderr."""
    code, out, err = cli(*argv)
    assert code == expected_code(rule), (out, err)
    assert rule in err + out and "Traceback" not in err, err
    return err


def model(path: Path, *, rows: int = 8) -> Path:
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    for i in range(3):
        f.tensors.add(f"blk.{i}.weight", np.full((rows, 32), i, np.float32))
    f.save(path)
    return path


@cache
def shard(no: int, count: int, tensors: int = 1, *, name: str | None = None) -> bytes:
    """One gguf-split shard saying ``split.no = no`` and ``split.count = count``, with one tensor."""
    f = gc.new()
    if no == 0:
        f.metadata["general.architecture"] = "llama"
    f.metadata.set("split.no", no, type="u16")
    f.metadata.set("split.count", count, type="u16")
    f.metadata.set("split.tensors.count", tensors, type="i32")
    f.tensors.add(name or f"t{no}", np.full(16, no, np.float32))
    return GGUF.build(f.to_container())


# -- fan-out: shard 1 first, then a total budget ------------------------------------------------------------------
def test_a_name_claiming_99999_shards_is_checked_on_shard_1_first(server):
    """Every shard the server makes up says it is one of 3: shard 1 is refused before any other is asked for."""
    server.generate("/fan/", lambda path: shard(0 if "-00001-" in path else 1, 3))
    url = server.url("/fan/m-00001-of-99999.gguf")
    refused(("info", url), "split.count")
    assert server.counts.requests == 1 and {p for p, _ in server.counts.ranges} == {"/fan/m-00001-of-99999.gguf"}


def test_a_consistent_set_larger_than_the_request_budget_is_refused_before_the_fan_out(server):
    """Shards that all agree on 65535 (split.count's largest): more shards than the command may make requests,
    refused after shard 1."""
    server.generate("/fan/", lambda path: shard(int(path.rsplit("-of-", 1)[0][-5:]) - 1, 65535, 65535))
    started = time.monotonic()
    err = refused(("info", server.url("/fan/m-00001-of-65535.gguf")), "remote.max_requests")
    assert "65534 more requests" in err
    assert server.counts.requests == 1 and time.monotonic() - started < 5
    configure(max_requests=10)  # a set of 9 fits, of 10 shards does not (shard 1 + 9 others = 10 requests: fits)
    server.reset_counts()
    server.generate("/ten/", lambda path: shard(int(path.rsplit("-of-", 1)[0][-5:]) - 1, 11, 11))
    refused(("info", server.url("/ten/m-00001-of-00011.gguf")), "remote.max_requests")
    assert server.counts.requests == 1


@pytest.mark.parametrize(
    ("lie", "rule"),
    [
        ("count", "split.count"),
        ("no", "split.no"),
        ("tensors", "split.tensors.count"),
        ("missing", "remote.status"),
        ("duplicate", "split.duplicate"),
    ],
)
def test_shard_sets_that_lie_are_refused_with_their_rule(server, lie, rule):
    n = 6

    def make(path: str) -> bytes | None:
        i = int(path.rsplit("-of-", 1)[0][-5:]) - 1
        if lie == "missing" and i == 3:
            return None
        count = n + 1 if lie == "count" and i == 2 else n
        no = 1 if lie == "no" and i == 4 else i
        total = n + 1 if lie == "tensors" else n
        return shard(no, count, total, name="same" if lie == "duplicate" and i in (1, 2) else None)

    server.generate("/lies/", make)
    url = server.url(f"/lies/m-00001-of-{n:05d}.gguf")
    with pytest.raises(FormatError) as e:
        gc.load(url)
    assert e.value.rule == rule
    if lie == "missing":
        assert isinstance(e.value, RemoteError) and e.value.status == 404 and "shard 4 of 6" in str(e.value)
    assert server.counts.requests <= n
    refused(("info", url), rule)


def test_scan_and_validate_read_a_first_shard_alone_and_scan_budgets_each_source(server, tmp_path):
    """``validate`` and ``scan`` check a first shard as the one file it is (as they do a local one): no fan-out.
    ``scan`` gives each source its own budget, so one source cannot starve the others."""
    from gguf_construct.cli.scan_runner import scan

    server.generate("/fan/", lambda path: shard(int(path.rsplit("-of-", 1)[0][-5:]) - 1, 65535, 65535))
    liar = server.url("/fan/m-00001-of-65535.gguf")
    assert cli("validate", liar)[0] == 0 and server.counts.requests == 1
    honest = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    configure(max_requests=1)  # one request per source: enough for each, not for all three
    out = io.StringIO()
    scan([liar, honest, honest + "?again"], out, concurrency=1)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["ok"] for line in lines] == [True, True, True], lines
    with pytest.raises(RemoteError) as e:
        gc.load(liar)  # load() opens the set: its budget (1 request) cannot cover the 65534 other shards
    assert e.value.rule == "remote.max_requests"


def test_a_consistent_set_opens_within_its_budget(server):
    n = 5
    big = {i: shard(i, n, n) + bytes(1 << 20) for i in range(n)}  # 1 MiB past each header: more than any first read
    server.generate("/ok/", lambda path: big[int(path.rsplit("-of-", 1)[0][-5:]) - 1])
    f = gc.load(server.url(f"/ok/m-00001-of-{n:05d}.gguf"))
    assert list(f.tensors) == [f"t{i}" for i in range(n)]
    assert [float(f.tensors[f"t{i}"].to_numpy()[0]) for i in range(n)] == list(range(n))
    later = [r for p, r in server.counts.ranges if "-00001-" not in p]
    assert later[: n - 1] == [f"bytes=0-{64 * 1024 - 1}"] * (n - 1), later  # a later shard's header: one small read


def test_the_byte_budget_is_total_over_shards_and_later_reads(server, tmp_path):
    n = 3
    server.generate("/b/", lambda path: shard(int(path.rsplit("-of-", 1)[0][-5:]) - 1, n, n))
    url = server.url(f"/b/m-00001-of-{n:05d}.gguf")
    one = len(shard(0, n, n))
    configure(max_bytes=one * n - 1)  # each file alone fits; the set does not
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule == "remote.max_bytes"
    refused(("--max-bytes", str(one * n - 1), "info", url), "remote.max_bytes")
    configure(max_bytes=None, max_file_bytes=one - 1)  # the per-file limit under it
    with pytest.raises(RemoteError, match="per file"):
        gc.load(url).tensors["t0"].to_numpy()
    configure(max_file_bytes=None)
    path = model(tmp_path / "m.gguf", rows=4096)  # 3 × 512 KiB of tensors
    big = server.add("/m.gguf", path.read_bytes())
    configure(budget=Budget(options().replace(max_bytes=1 << 20)))  # one command's budget, running
    f = gc.load(big)
    f.tensors["blk.0.weight"].to_numpy()
    with pytest.raises(RemoteError) as e:
        for t in f.tensors.values():
            t.to_numpy()  # tensors read later count against the same budget
    assert e.value.rule == "remote.max_bytes"


def test_the_request_budget_counts_retries(server, tmp_path):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    configure(max_requests=2, retries=5)
    server.faults.fail_next = 10
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule == "remote.max_requests" and server.counts.requests == 2


def test_sparse_buffers_count_against_memory_and_spill_to_disk(server, tmp_path):
    path = model(tmp_path / "m.gguf", rows=1024)
    url = server.add("/m.gguf", path.read_bytes())
    budget = Budget(options())
    configure(budget=budget)
    f = gc.load(url)
    assert budget.memory == path.stat().st_size  # the whole buffer is reserved
    src = f.tensors["blk.1.weight"]._data.source
    assert type(src._buffer).__name__ == "mmap" and budget.bytes >= src.fetched
    del f, src
    import gc as garbage

    garbage.collect()
    assert budget.memory == 0  # given back with the source
    budget = Budget(options().replace(max_memory=1000))
    configure(budget=budget)
    f = gc.load(url)  # does not fit: buffered in a temporary file, and still right
    assert budget.memory == 0
    assert np.array_equal(f.tensors["blk.2.weight"].to_numpy(), gc.load(path).tensors["blk.2.weight"].to_numpy())


def test_a_download_goes_straight_into_the_budgeted_buffer(server, tmp_path):
    """``--download`` (a server without ranges): the body is written into the file's sparse buffer, reserved
    against the memory budget (or on disk past it), not collected in a bytearray first."""
    path = model(tmp_path / "m.gguf", rows=1024)
    url = server.add("/m.gguf", path.read_bytes())
    server.faults.no_ranges = True
    for max_memory, reserved in ((1 << 30, path.stat().st_size), (1000, 0)):
        budget = Budget(options().replace(max_memory=max_memory))
        configure(download=True, budget=budget)
        f = gc.load(url)
        assert budget.memory == reserved and budget.bytes == path.stat().st_size and server.counts.requests == 1
        assert np.array_equal(f.tensors["blk.2.weight"].to_numpy(), gc.load(path).tensors["blk.2.weight"].to_numpy())
        server.reset_counts()


def test_the_time_budget_is_total(server, tmp_path):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.delay = 0.4
    configure(budget=Budget(options().replace(max_seconds=1.0)))
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        for _ in range(10):  # each load alone is quick; together they pass the command's time
            gc.load(url)
    assert e.value.rule == "remote.deadline" and time.monotonic() - started < 4


# -- deadlines on the socket ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["drip_headers", "drip_body"])
def test_a_dripping_server_is_cut_off_at_the_deadline(server, tmp_path, where):
    """A byte every 50 ms never trips a 2 s read timeout; the 1 s deadline of the request cuts it off."""
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    setattr(server.faults, where, 0.05)
    configure(request_deadline=1.0)
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule == "remote.deadline" and e.value.url == url
    assert time.monotonic() - started < 4
    refused(("--request-deadline", "0.5", "info", url), "remote.deadline")


def test_a_tls_handshake_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline():
    from http_testserver import TLS_STALL, DripServer

    configure(request_deadline=1.0)
    with DripServer(TLS_STALL) as s:
        started = time.monotonic()
        with pytest.raises(RemoteError) as e:
            gc.load(f"https://127.0.0.1:{s.port}/m.gguf")
        assert e.value.rule == "remote.deadline" and time.monotonic() - started < 4


def test_headers_dripped_within_each_read_timeout_are_cut_off_at_the_read_timeout(server, tmp_path):
    """The read timeout bounds the wait for the status line and headers in all, not each byte of them."""
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.drip_headers = 0.05
    configure(read_timeout=0.5, request_deadline=60.0, retries=0)
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule == "remote.deadline" and "headers" in str(e.value) and time.monotonic() - started < 3
    server.faults.drip_headers = 0.0
    server.faults.drip_body = 0.001  # a body slower than the read timeout in all, each byte well within it
    configure(first_chunk=1000)
    assert len(gc.load(url).tensors) == 3


# -- header numbers ------------------------------------------------------------------------------------------------
HUGE = "9" * 5000
BAD_CONTENT_RANGES = [
    f"bytes 0-10/{HUGE}",
    f"bytes 0-{HUGE}/100",
    "bytes 0-10/1²³",
    "bytes ٠-١٠/١٠٠",
    f"bytes 0-10/{2**62}",
    f"bytes 0-10/{2**64}",
    f"bytes 0-10/{2**70}",
    "bytes 0-5/3",
    "bytes 5-2/100",
    "bytes 0-10/100\u2003",
    "bytes -1-10/100",
]


@pytest.mark.parametrize("value", BAD_CONTENT_RANGES, ids=lambda v: v[:24])
def test_a_lying_content_range_is_a_remote_error(server, tmp_path, value):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.content_range = value
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule in ("remote.content_range", "remote.size") and e.value.status == 206
    assert len(str(e.value)) < 400  # the header is not echoed whole
    refused(("info", url), e.value.rule)
    code, out, err = cli("validate", url)
    assert code == expected_code(e.value.rule) and e.value.rule in out + err and "Traceback" not in err


@pytest.mark.parametrize("value", [HUGE, "1²", "١٢", str(2**70), "-5", "12 13"], ids=lambda v: v[:12])
def test_a_lying_content_length_is_a_remote_error(server, tmp_path, value):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.no_ranges = True
    server.faults.content_length = value
    configure(download=True)
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule in ("remote.content_length", "remote.size", "remote.connection", "remote.dropped")
    refused(("--download", "info", url), e.value.rule)


@pytest.mark.parametrize("value", [HUGE, "1²", str(2**70), "3"], ids=lambda v: v[:12])
def test_a_lying_content_length_on_a_range_is_a_remote_error_or_ignored(server, tmp_path, value):
    """urllib3 ignores a Content-Length it cannot read: the Content-Range and the body decide; a short one ends
    the body early (a resume, then a refusal)."""
    path = model(tmp_path / "m.gguf")
    url = server.add("/m.gguf", path.read_bytes())
    server.faults.content_length = value
    try:
        f = gc.load(url)
    except RemoteError as e:
        assert e.rule.startswith("remote.")
        refused(("info", url), e.rule)
    else:
        assert np.array_equal(f.tensors["blk.2.weight"].to_numpy(), gc.load(path).tensors["blk.2.weight"].to_numpy())


@pytest.mark.parametrize("value", [f"bytes */{HUGE}", f"bytes */{2**70}", "bytes */١٠", "bytes */5"], ids=lambda v: v[:14])
def test_a_416_with_any_size_is_a_remote_error(server, tmp_path, value):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.unsatisfiable = value
    with pytest.raises(RemoteError) as e:
        gc.load(url)
    assert e.value.rule == "remote.status" and e.value.status == 416
    refused(("info", url), "remote.status")


@pytest.mark.parametrize("value", [HUGE, "1²", str(2**70), "Thu, 01 Jan 99999 00:00:00 GMT"], ids=lambda v: v[:12])
def test_a_retry_after_of_any_size_neither_crashes_nor_stalls(server, tmp_path, value):
    url = server.add("/m.gguf", model(tmp_path / "m.gguf").read_bytes())
    server.faults.fail_next, server.faults.retry_after = 1, value
    started = time.monotonic()
    try:
        assert len(gc.load(url).tensors) == 3
    except RemoteError as e:
        assert e.rule == "remote.connection"
    assert time.monotonic() - started < 4


def test_fsspec_sizes_that_are_not_sizes(monkeypatch, tmp_path):
    fsspec = pytest.importorskip("fsspec")
    with fsspec.open("memory://hostile/m.gguf", "wb") as f:
        f.write(model(tmp_path / "m.gguf").read_bytes())
    fs = fsspec.filesystem("memory")
    for size in (None, 2**70, -1, "12"):
        monkeypatch.setattr(type(fs), "size", lambda self, path, size=size: size)
        with pytest.raises(RemoteError) as e:
            gc.load("memory://hostile/m.gguf")
        assert e.value.rule == "remote.size"


# -- Ollama registries ---------------------------------------------------------------------------------------------
def registry(server: TestServer, config: bytes, blob: bytes, *, sep: str = ":", media: str = "application/vnd.ollama.image.model") -> str:
    """A model in the server's registry: a config blob and one model blob, digests written ``sha256<sep><hex>``."""
    digest, cdigest = hashlib.sha256(blob).hexdigest(), hashlib.sha256(config).hexdigest()
    manifest = Manifest(
        Layer("application/vnd.docker.container.image.v1+json", f"sha256{sep}{cdigest}", len(config)),
        (Layer(media, f"sha256{sep}{digest}", len(blob)),),
    )
    server.add("/v2/library/m/manifests/latest", manifest.to_bytes())
    server.add(f"/v2/library/m/blobs/sha256:{digest}", blob)
    server.add(f"/v2/library/m/blobs/sha256:{cdigest}", config)
    return f"ollama://127.0.0.1:{server.httpd.server_address[1]}/library/m"


@pytest.mark.parametrize(
    "config", [b"[]", b'"text"', b"null", b"7", b'{"n": ' + b"1" * 5000 + b"}", b"{" * 200_000, b"{]"], ids=lambda c: c[:8].decode()
)
def test_an_ollama_config_that_is_not_an_object_fails_like_a_local_one(server, tmp_path, config):
    name = registry(server, config, model(tmp_path / "m.gguf").read_bytes())
    for command in ("info", "validate"):
        code, out, err = cli(command, name)
        assert code == 1 and "Traceback" not in err, (command, err)
        assert any(r in out + err for r in ("blob.json", "limit.number_digits", "limit.nesting")), (command, out, err)


def test_ollama_digests_written_with_a_dash_are_checked_not_crashed_on(server, tmp_path):
    data = model(tmp_path / "m.gguf").read_bytes()
    name = registry(server, b'{"model_format":"gguf"}', data, sep="-")
    assert cli("validate", name)[0] == 0
    assert len(gc.load(name).tensors) == 3
    bad = bytearray(data)
    bad[-1] ^= 1
    server.add(f"/v2/library/m/blobs/sha256:{hashlib.sha256(data).hexdigest()}", bytes(bad))
    code, out, err = cli("validate", name)
    assert code == 1 and "blob.digest" in out + err and "Traceback" not in err


def test_an_ollama_json_layer_larger_than_the_reader_takes_is_not_fetched(server, tmp_path):
    from gguf_construct.core.limits import limit

    big = b'{"a": "' + b"x" * (limit("header_bytes") + 1) + b'"}'
    name = registry(server, big, model(tmp_path / "m.gguf").read_bytes())
    server.reset_counts()
    refused(("info", name), "limit.header_bytes")
    assert server.counts.bytes < 1 << 20


# -- credentials on redirects --------------------------------------------------------------------------------------
def test_every_supplied_header_is_dropped_on_a_redirect_to_another_port(server, tmp_path, monkeypatch):
    path = model(tmp_path / "m.gguf")
    with TestServer() as other:
        target = other.add("/m.gguf", path.read_bytes())
        server.add("/m.gguf", path.read_bytes())
        server.redirects["/away.gguf"] = target  # same host, another port: another origin
        server.redirects["/here.gguf"] = server.url("/m.gguf")
        secrets = {"X-Api-Key": "k1", "Private-Token": "k2", "Authorization": "Bearer k3", "Cookie": "c=k4", "X-Custom-Auth": "k5"}
        argv = [a for k, v in secrets.items() for a in ("--header", f"{k}: {v}")]
        code, _, err = cli(*argv, "info", server.url("/away.gguf"))
        assert code == 0, err
        sent_there = [h for _, h in other.counts.headers]
        assert sent_there and not any(k.lower() in {n.lower() for n in h} for h in sent_there for k in secrets), sent_there
        assert all(h.get("Range") for h in sent_there)  # the request itself is whole
        assert all(h.get("X-Api-Key") == "k1" for p, h in server.counts.headers if p == "/away.gguf")
        server.reset_counts()
        assert cli(*argv, "info", server.url("/here.gguf"))[0] == 0  # the same origin keeps them
        assert all(h.get("X-Api-Key") == "k1" and h.get("Private-Token") == "k2" for _, h in server.counts.headers)
        monkeypatch.setenv("HF_ENDPOINT", server.base)
        monkeypatch.setenv("HF_TOKEN", "hf-secret")
        server.redirects["/o/r/resolve/main/m.gguf"] = target
        other.reset_counts()
        assert len(gc.load("hf://o/r/m.gguf").tensors) == 3
        assert other.counts.requests and not any("Authorization" in h for _, h in other.counts.headers)


# -- names ----------------------------------------------------------------------------------------------------------
BAD_HF = [
    "hf://owner/repo/../../../../api/whoami-v2",
    "hf://owner/repo/a/./b.gguf",
    "hf://../repo/m.gguf",
    "hf://owner/../m.gguf",
    "hf://owner/repo@../m.gguf",
    "hf://owner/repo@..%2f..%2fx/m.gguf",
    "hf://owner/repo/%2e%2e/%2E%2E/api/m",
    "hf://owner/repo/a%2fb.gguf",
    "hf://own%2eer/repo/m.gguf",
    "hf://owner/re%2fpo/m.gguf",
    "hf://owner/repo@main%2f..%2f/m.gguf",
    "hf://owner/repo/a\\..\\b.gguf",
    "hf://owner/repo//m.gguf",
    "hf://owner/repo/m.gguf/..",
    "hf://datasets/../repo/m.gguf",
    "hf://owner/repo@./m.gguf",
]
BAD_OLLAMA = [
    "ollama://127.0.0.1:1/../m",
    "ollama://127.0.0.1:1/library/..",
    "ollama://127.0.0.1:1/library/m:..",
    "ollama://127.0.0.1:1/%2e%2e/m",
    "ollama://127.0.0.1:1/library/%2e%2e",
    "ollama://127.0.0.1:1/library/m%2fx",
    "ollama://127.0.0.1:1/library/m:%2e%2e",
    "ollama://../library/m",
    "ollama://host%2f..:1/library/m",
    "ollama://./m",
    "ollama://127.0.0.1:1/./m",
]


@pytest.mark.parametrize("name", BAD_HF + BAD_OLLAMA)
def test_names_that_leave_their_repository_are_refused_before_a_request(server, monkeypatch, name):
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    with pytest.raises(RemoteError) as e:
        gc.load(name.replace("127.0.0.1:1", f"127.0.0.1:{server.httpd.server_address[1]}"))
    assert e.value.rule in ("remote.name", "remote.url")
    assert server.counts.requests == 0
    refused(("info", name), e.value.rule)


def test_good_names_still_resolve():
    from gguf_construct.sources.urls import hf_url, ollama_name

    assert hf_url("hf://Org-1/model.v2_x@v1.0/sub/dir/m.Q4_K.gguf")[0].endswith("/Org-1/model.v2_x/resolve/v1.0/sub/dir/m.Q4_K.gguf")
    assert ollama_name("ollama://registry.example.com:5000/ns/llama3.2:3b-q4_K_M").manifest_url.endswith(
        "/v2/ns/llama3.2/manifests/3b-q4_K_M"
    )
    assert json.dumps(ollama_name("ollama://[::1]:11434/library/m").base) == '"http://[::1]:11434"'


def test_budget_limits_from_the_environment():
    from gguf_construct.sources.options import from_environment

    with pytest.warns(UserWarning, match="GGUF_CONSTRUCT_MAX_(SECONDS|MEMORY)"):
        opts = from_environment(
            {
                "GGUF_CONSTRUCT_MAX_REQUESTS": "7",
                "GGUF_CONSTRUCT_MAX_BYTES": "1000",
                "GGUF_CONSTRUCT_MAX_SECONDS": "1e999",
                "GGUF_CONSTRUCT_REQUEST_DEADLINE": "2.5",
                "GGUF_CONSTRUCT_MAX_MEMORY": "١٢",
            }
        )
    assert (opts.max_requests, opts.max_bytes, opts.max_seconds, opts.request_deadline, opts.max_memory) == (7, 1000, None, 2.5, 1 << 30)
