"""Error classification, driven by real exceptions from real sockets, files and libraries."""

from __future__ import annotations

import email.message
import errno
import http.client
import shutil
import socket
import sqlite3
import ssl
import struct
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
import requests

from durq.classify import (
    PERMANENT,
    TRANSIENT,
    Classification,
    Rule,
    classify,
    rule,
)
from durq.errors import ConfigError, Permanent, Transient

E = TypeVar("E", bound=BaseException)

# ---- helpers ---------------------------------------------------------------------------------


def caught(fn: Callable[[], object]) -> BaseException:
    """Run ``fn`` and return what it raised (fail the test if it raised nothing)."""
    try:
        fn()
    except BaseException as exc:
        return exc
    pytest.fail(f"{fn} raised nothing")


def chained(outer: E, inner: BaseException) -> E:
    """``outer`` really raised ``from inner``."""
    try:
        raise outer from inner
    except BaseException:
        return outer


def with_context(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` really raised while handling ``inner`` (implicit ``__context__``)."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - the implicit context is the point
    except BaseException as exc:
        return exc


def chain_of(depth: int, innermost: BaseException) -> BaseException:
    """RuntimeErrors raised from each other, ``innermost`` ``depth`` links down."""
    exc = innermost
    for level in range(depth):
        exc = chained(RuntimeError(f"level {level}"), exc)
    return exc


def http_error(code: int, headers: dict[str, str] | None = None) -> urllib.error.HTTPError:
    message = email.message.Message()
    for name, value in (headers or {}).items():
        message[name] = value
    return urllib.error.HTTPError("http://example.test/", code, "status", message, None)


def requests_error(status: int) -> BaseException:
    response = requests.Response()
    response.status_code = status
    response.url = "http://example.test/"
    response.reason = "status"
    return caught(response.raise_for_status)


def httpx_error(status: int) -> BaseException:
    response = httpx.Response(status, request=httpx.Request("GET", "http://example.test/"))
    return caught(response.raise_for_status)


def kind(error: BaseException, **kwargs: object) -> tuple[str, str]:
    result = classify(error, **kwargs)  # type: ignore[arg-type]
    return result.kind, result.reason


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (backlog) but never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


@pytest.fixture
def serve_once() -> Iterator[Callable[[bytes], int]]:
    """Start a one-shot HTTP server: read a request, send ``payload``, close."""
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(payload: bytes) -> int:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        listeners.append(listener)

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(payload)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return int(listener.getsockname()[1])

    yield start
    for thread in threads:
        thread.join(10)
    for listener in listeners:
        listener.close()


@pytest.fixture(scope="module")
def tls_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A TLS server with a self-signed certificate, which clients must refuse to trust."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)  # so that the loop notices ``stop``
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    with context.wrap_socket(conn, server_side=True):
                        pass
                except (ssl.SSLError, OSError):
                    pass  # the client hung up on our untrusted certificate

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(10)
    listener.close()


# ---- built-in table: sockets and the standard library -----------------------------------------


def test_connection_reset_from_a_real_rst() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as client:
            server, _ = listener.accept()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            server.close()  # linger 0: the kernel sends RST
            error = caught(lambda: client.recv(10))
    assert isinstance(error, ConnectionResetError)
    assert kind(error) == (TRANSIENT, "connection_reset")


def test_connection_refused(closed_port: int) -> None:
    error = caught(lambda: socket.create_connection(("127.0.0.1", closed_port), timeout=5))
    assert kind(error) == (TRANSIENT, "connection_refused")


def test_broken_pipe() -> None:
    left, right = socket.socketpair()
    right.close()
    with left:

        def flood() -> None:
            for _ in range(100):
                left.sendall(b"x" * 65536)

        error = caught(flood)
    assert isinstance(error, BrokenPipeError)
    assert kind(error) == (TRANSIENT, "broken_pipe")


def test_connection_aborted_and_plain_connection_error() -> None:
    def abort() -> None:
        raise OSError(errno.ECONNABORTED, "Software caused connection abort")

    aborted = caught(abort)
    assert isinstance(aborted, ConnectionAbortedError)  # OSError maps the errno to the subclass
    assert kind(aborted) == (TRANSIENT, "connection_aborted")
    assert kind(ConnectionError("dropped")) == (TRANSIENT, "connection")


def test_socket_timeout() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(0.01)
        error = caught(lambda: left.recv(1))
    assert isinstance(error, TimeoutError)
    assert kind(error) == (TRANSIENT, "timeout")


def test_dns_failure() -> None:
    error = caught(lambda: socket.getaddrinfo("durq-test.invalid", 80))  # RFC 6761: never resolves
    assert isinstance(error, socket.gaierror)
    assert kind(error) == (TRANSIENT, "dns")


def test_network_unreachable_errno() -> None:
    assert kind(OSError(errno.ENETUNREACH, "Network is unreachable")) == (
        TRANSIENT,
        "network_unreachable",
    )
    assert kind(OSError(errno.ENOENT, "No such file")) == (TRANSIENT, "unclassified")
    assert kind(OSError(errno.ENOENT, "No such file"), default=PERMANENT)[0] == PERMANENT


def test_tls_protocol_error_is_transient() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)  # not TLS at all
        context = ssl.create_default_context()
        error = caught(lambda: context.wrap_socket(left, server_hostname="localhost"))
    assert type(error) is not ssl.SSLCertVerificationError
    assert isinstance(error, ssl.SSLError)
    assert kind(error) == (TRANSIENT, "ssl")


def test_certificate_failure_is_permanent_in_every_client(tls_port: int) -> None:
    url = f"https://127.0.0.1:{tls_port}/"
    context = ssl.create_default_context()
    with socket.create_connection(("127.0.0.1", tls_port), timeout=5) as sock:
        direct = caught(lambda: context.wrap_socket(sock, server_hostname="localhost"))
    assert isinstance(direct, ssl.SSLCertVerificationError)
    assert kind(direct) == (PERMANENT, "ssl_cert_verify")

    via_urllib = caught(lambda: urllib.request.urlopen(url, timeout=5))
    assert isinstance(via_urllib, urllib.error.URLError)
    assert kind(via_urllib) == (PERMANENT, "ssl_cert_verify")

    via_requests = caught(lambda: requests.get(url, timeout=5))
    assert isinstance(via_requests, requests.exceptions.SSLError)
    assert kind(via_requests) == (PERMANENT, "ssl_cert_verify")

    via_httpx = caught(lambda: httpx.get(url, timeout=5))
    assert isinstance(via_httpx, httpx.ConnectError)
    assert kind(via_httpx) == (PERMANENT, "ssl_cert_verify")


def _http_client_error(port: int, read_body: bool) -> BaseException:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:

        def go() -> None:
            conn.request("GET", "/")
            with conn.getresponse() as response:
                if read_body:
                    response.read()

        return caught(go)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("payload", "read_body", "expected_type"),
    [
        (b"", False, http.client.RemoteDisconnected),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", True, http.client.IncompleteRead),
        (b"garbage\r\n\r\n", False, http.client.BadStatusLine),
    ],
)
def test_http_client_dropped_connections(
    serve_once: Callable[[bytes], int],
    payload: bytes,
    read_body: bool,
    expected_type: type[BaseException],
) -> None:
    error = _http_client_error(serve_once(payload), read_body)
    assert type(error) is expected_type
    assert kind(error) == (TRANSIENT, "connection_dropped")


def test_urlerror_takes_its_reason(closed_port: int) -> None:
    error = caught(lambda: urllib.request.urlopen(f"http://127.0.0.1:{closed_port}/", timeout=5))
    assert type(error) is urllib.error.URLError
    assert kind(error) == (TRANSIENT, "connection_refused")


def test_urlerror_without_a_known_reason_is_transient() -> None:
    error = caught(lambda: urllib.request.urlopen("nope://example.test/"))
    assert type(error) is urllib.error.URLError
    assert kind(error) == (TRANSIENT, "url_error")


TRANSIENT_CODES = [408, 425, 429, 500, 502, 503, 504, 599]
PERMANENT_CODES = [400, 401, 403, 404, 410, 422]
NO_OPINION_CODES = [302, 402, 409, 418]


@pytest.mark.parametrize("code", TRANSIENT_CODES)
def test_http_status_transient(code: int) -> None:
    for error in (http_error(code), requests_error(code), httpx_error(code)):
        assert kind(error) == (TRANSIENT, f"http_{code}")


@pytest.mark.parametrize("code", PERMANENT_CODES)
def test_http_status_permanent(code: int) -> None:
    for error in (http_error(code), requests_error(code), httpx_error(code)):
        assert kind(error) == (PERMANENT, f"http_{code}")


@pytest.mark.parametrize("code", NO_OPINION_CODES)
def test_other_http_statuses_have_no_opinion(code: int) -> None:
    """Not even the URLError base class (HTTPError's parent) may call them transient."""
    errors = [http_error(code), httpx_error(code)]
    if code >= 400:
        errors.append(requests_error(code))  # raise_for_status ignores 3xx
    for error in errors:
        assert kind(error) == (TRANSIENT, "unclassified")
        assert kind(error, default=PERMANENT) == (PERMANENT, "unclassified")


def test_sqlite_busy_from_a_real_lock(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("INSERT INTO t VALUES (1)")
        error = caught(lambda: writer.execute("INSERT INTO t VALUES (2)"))
    finally:
        holder.close()
        writer.close()
    assert isinstance(error, sqlite3.OperationalError)
    assert "locked" in str(error)
    assert kind(error) == (TRANSIENT, "sqlite_busy")


def test_sqlite_busy_by_message_alone() -> None:
    """Errors re-raised without SQLite's error name (e.g. by a wrapper) still count."""
    for message in ("database is locked", "database table is locked", "Database is busy"):
        error = sqlite3.OperationalError(message)
        assert getattr(error, "sqlite_errorname", None) is None
        assert kind(error) == (TRANSIENT, "sqlite_busy")


def test_other_sqlite_errors_have_no_opinion(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    try:
        error = caught(lambda: conn.execute("SELECT * FROM missing"))
    finally:
        conn.close()
    assert isinstance(error, sqlite3.OperationalError)
    assert kind(error) == (TRANSIENT, "unclassified")


# ---- built-in table: requests and httpx ------------------------------------------------------


def test_requests_connection_error(closed_port: int) -> None:
    error = caught(lambda: requests.get(f"http://127.0.0.1:{closed_port}/", timeout=5))
    assert isinstance(error, requests.exceptions.ConnectionError)
    assert kind(error) == (TRANSIENT, "connection")


def test_requests_timeout(silent_port: int) -> None:
    error = caught(lambda: requests.get(f"http://127.0.0.1:{silent_port}/", timeout=0.2))
    assert isinstance(error, requests.exceptions.Timeout)
    assert kind(error) == (TRANSIENT, "timeout")


def test_requests_chunked_encoding_error(serve_once: Callable[[bytes], int]) -> None:
    port = serve_once(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc")
    error = caught(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=5))
    assert isinstance(error, requests.exceptions.ChunkedEncodingError)
    assert kind(error) == (TRANSIENT, "connection_dropped")


def test_httpx_connect_error(closed_port: int) -> None:
    error = caught(lambda: httpx.get(f"http://127.0.0.1:{closed_port}/", timeout=5))
    assert isinstance(error, httpx.ConnectError)
    assert kind(error) == (TRANSIENT, "connection")


def test_httpx_read_timeout(silent_port: int) -> None:
    error = caught(lambda: httpx.get(f"http://127.0.0.1:{silent_port}/", timeout=0.2))
    assert isinstance(error, httpx.ReadTimeout)
    assert kind(error) == (TRANSIENT, "timeout")


def test_httpx_remote_protocol_error(serve_once: Callable[[bytes], int]) -> None:
    port = serve_once(b"")
    error = caught(lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=5))
    assert isinstance(error, httpx.RemoteProtocolError)
    assert kind(error) == (TRANSIENT, "connection_dropped")


def test_httpx_bad_url_is_not_called_transient() -> None:
    error = caught(lambda: httpx.get("nope://example.test/"))
    assert isinstance(error, httpx.UnsupportedProtocol)
    assert kind(error, default=PERMANENT) == (PERMANENT, "unclassified")


def test_requests_and_httpx_are_never_imported() -> None:
    code = (
        "import sys\n"
        "from durq.classify import classify\n"
        "from durq.retry import retry_after_of\n"
        "e = RuntimeError('x')\n"
        "assert classify(e).reason == 'unclassified'\n"
        "assert retry_after_of(e, 0.0) is None\n"
        "assert 'requests' not in sys.modules and 'httpx' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---- precedence along the chain --------------------------------------------------------------


def test_durq_signals() -> None:
    assert kind(Permanent("no")) == (PERMANENT, "durq.Permanent")
    assert kind(Transient("again")) == (TRANSIENT, "durq.Transient")


def test_outermost_wins() -> None:
    assert kind(chained(Permanent("stop"), ConnectionResetError())) == (
        PERMANENT,
        "durq.Permanent",
    )
    assert kind(chained(RuntimeError("wrap"), ConnectionResetError())) == (
        TRANSIENT,
        "connection_reset",
    )
    assert kind(chained(Transient("retry it"), http_error(404))) == (TRANSIENT, "durq.Transient")
    assert kind(with_context(http_error(404), ConnectionResetError())) == (PERMANENT, "http_404")
    assert kind(chain_of(3, chained(http_error(503), http_error(404)))) == (
        TRANSIENT,
        "http_503",
    )


def test_implicit_context_and_suppression() -> None:
    assert kind(with_context(ValueError("bad"), TimeoutError())) == (TRANSIENT, "timeout")

    def suppressed() -> None:
        try:
            raise TimeoutError
        except TimeoutError:
            raise ValueError("bad") from None

    error = caught(suppressed)
    assert error.__context__ is not None
    assert kind(error, default=PERMANENT) == (PERMANENT, "unclassified")


def test_cause_is_walked_before_context() -> None:
    def both() -> None:
        try:
            raise http_error(404)
        except urllib.error.HTTPError:
            raise RuntimeError("wrap") from TimeoutError()

    error = caught(both)
    assert error.__context__ is not None and error.__cause__ is not None
    assert kind(error) == (TRANSIENT, "timeout")


def test_exception_groups() -> None:
    assert kind(ExceptionGroup("g", [ConnectionResetError(), http_error(404)])) == (
        PERMANENT,
        "http_404",
    )
    assert kind(ExceptionGroup("g", [ValueError(), TimeoutError()])) == (TRANSIENT, "timeout")
    assert kind(ExceptionGroup("g", [ValueError()]), default=PERMANENT) == (
        PERMANENT,
        "unclassified",
    )
    nested = ExceptionGroup(
        "outer", [ExceptionGroup("inner", [chained(ValueError(), TimeoutError())])]
    )
    assert kind(nested) == (TRANSIENT, "timeout")
    base = BaseExceptionGroup("b", [KeyboardInterrupt(), Permanent("stop")])
    assert kind(base) == (PERMANENT, "durq.Permanent")


def test_group_members_come_before_the_groups_cause() -> None:
    assert kind(chained(ExceptionGroup("g", [http_error(404)]), TimeoutError())) == (
        PERMANENT,
        "http_404",
    )
    assert kind(chained(ExceptionGroup("g", [ValueError()]), TimeoutError())) == (
        TRANSIENT,
        "timeout",
    )


def test_depth_limit() -> None:
    assert kind(chain_of(16, TimeoutError())) == (TRANSIENT, "timeout")
    assert kind(chain_of(17, TimeoutError()), default=PERMANENT) == (PERMANENT, "unclassified")


def test_cause_cycles_terminate() -> None:
    err = RuntimeError("me")
    try:
        raise err from err
    except RuntimeError:
        pass
    assert err.__cause__ is err
    assert kind(err) == (TRANSIENT, "unclassified")

    first, second = RuntimeError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    second.__context__ = TimeoutError()
    second.__suppress_context__ = False
    assert kind(first) == (TRANSIENT, "timeout")


# ---- user rules ------------------------------------------------------------------------------


class QuotaError(Exception):
    pass


def test_rule_by_type_beats_the_table() -> None:
    rules = [rule(PERMANENT, types=ConnectionResetError)]
    assert kind(ConnectionResetError(), rules=rules) == (PERMANENT, "rule:ConnectionResetError")
    assert kind(chained(RuntimeError(), ConnectionResetError()), rules=rules)[0] == PERMANENT


def test_rule_by_pattern_searches_message_and_type_name() -> None:
    by_message = rule(PERMANENT, pattern="quota exceeded", reason="quota")
    assert kind(RuntimeError("Daily QUOTA Exceeded"), rules=[by_message]) == (
        PERMANENT,
        "rule:quota",
    )
    assert kind(RuntimeError("fine"), rules=[by_message]) == (TRANSIENT, "unclassified")
    by_name = rule(PERMANENT, pattern="^quotaerror$")
    assert kind(QuotaError("x"), rules=[by_name]) == (PERMANENT, "rule:^quotaerror$")
    by_module = rule(PERMANENT, pattern=r"test_classify\.QuotaError")
    assert by_module.matches(QuotaError())


def test_rule_with_types_and_pattern_needs_both() -> None:
    both = rule(PERMANENT, types=(ValueError,), pattern="quota")
    assert both.matches(ValueError("quota"))
    assert not both.matches(ValueError("other"))
    assert not both.matches(KeyError("quota"))


def test_first_rule_wins_and_signals_beat_rules() -> None:
    rules = [rule(TRANSIENT, pattern="x", reason="first"), rule(PERMANENT, pattern="x")]
    assert kind(RuntimeError("x"), rules=rules) == (TRANSIENT, "rule:first")
    catch_all = [rule(TRANSIENT, pattern="")]
    assert kind(Permanent("x"), rules=catch_all) == (PERMANENT, "durq.Permanent")


def test_outer_builtin_beats_inner_rule() -> None:
    rules = [rule(PERMANENT, pattern="quota")]
    assert kind(chained(TimeoutError(), ValueError("quota")), rules=rules) == (TRANSIENT, "timeout")
    assert kind(chained(ValueError("quota"), TimeoutError()), rules=rules) == (
        PERMANENT,
        "rule:quota",
    )


def test_user_callable() -> None:
    seen: list[BaseException] = []

    def out_of_stock(exc: BaseException) -> str | None:
        seen.append(exc)
        return PERMANENT if isinstance(exc, KeyError) else None

    assert kind(chained(RuntimeError(), KeyError("sku")), rules=[out_of_stock]) == (
        PERMANENT,
        "rule:test_user_callable.<locals>.out_of_stock",
    )
    assert [type(e) for e in seen] == [RuntimeError, KeyError]
    assert kind(TimeoutError(), rules=[out_of_stock]) == (TRANSIENT, "timeout")


def test_callable_returning_garbage_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="maybe"):
        classify(RuntimeError(), rules=[lambda exc: "maybe"])


def test_default_override() -> None:
    assert classify(RuntimeError()) == Classification(TRANSIENT, "unclassified")
    assert classify(RuntimeError(), default=PERMANENT) == Classification(PERMANENT, "unclassified")
    assert classify(TimeoutError(), default=PERMANENT).kind == TRANSIENT
    assert classify(TimeoutError()).retry_after is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: rule("sometimes", types=ValueError),
        lambda: rule(PERMANENT),
        lambda: rule(PERMANENT, pattern="(unclosed"),
        lambda: rule(PERMANENT, types=(int,)),  # type: ignore[arg-type]
        lambda: Rule(PERMANENT),
        lambda: Classification("maybe", "x"),
        lambda: classify(RuntimeError(), default="maybe"),
        lambda: classify(RuntimeError(), rules=["not a rule"]),  # type: ignore[list-item]
    ],
)
def test_bad_arguments_raise_config_error(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigError):
        make()


def test_rule_accepts_a_single_type_and_lists() -> None:
    assert rule(PERMANENT, types=KeyError).types == (KeyError,)
    assert rule(PERMANENT, types=[KeyError, ValueError]).types == (KeyError, ValueError)
    assert isinstance(ConfigError("x"), ValueError)


def test_unprintable_exception_does_not_break_pattern_rules() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert kind(Unprintable(), rules=[rule(PERMANENT, pattern="^unprintable$")]) == (
        PERMANENT,
        "rule:^unprintable$",
    )
