"""A local stand-in for the OpenAI and Voyage HTTP APIs, for tests that must not touch the network.

It speaks the wire formats the real ``openai`` and ``voyageai`` clients use, so tests drive
the real SDKs: ``POST /v1/embeddings`` (OpenAI and Voyage shapes, float or base64 vectors)
and ``POST /v1/chat/completions``. Outputs are deterministic functions of the input text.
Every request is recorded, and failures can be scripted (``fail_next``,
``reject_inputs_containing``). Use it as a context manager: on exit the server and every
handler thread are joined.

Which API a ``/v1/embeddings`` request is for is told from its body: the Voyage client
always sends ``truncation``/``input_type``/``output_dtype``, the OpenAI client never does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}
VOYAGE_DIMS = {"voyage-3-lite": 512}
OPENAI_MAX_INPUTS = 2048
VOYAGE_MAX_INPUTS = 1000
_VOYAGE_KEYS = frozenset({"truncation", "input_type", "output_dtype", "output_dimension"})


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def block_external_network(monkeypatch: Any) -> None:
    """Make any non-loopback connect or DNS lookup fail loudly (RuntimeError: not retried).

    A test that forgot ``base_url`` would otherwise try the real API.
    """
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in _LOOPBACK:
            raise RuntimeError(f"test tried to resolve {name!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def fake_vector(text: str, dim: int) -> np.ndarray:
    """Deterministic, deliberately *unnormalized* float32 vector for ``text``."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(dim) * 3.0).astype(np.float32)


def fake_summary(user_message: str) -> str:
    """Deterministic completion text for a chat request."""
    digest = hashlib.blake2b(user_message.encode("utf-8"), digest_size=6).hexdigest()
    return f"summary-{digest}"


def fake_token_count(text: str) -> int:
    """Crude usage count for responses (whitespace words, at least 1)."""
    return max(1, len(text.split()))


@dataclass
class RecordedRequest:
    """One request as the server saw it (including ones it failed on purpose).

    ``headers`` keys are lower-cased (clients differ in capitalization).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    api: str = ""

    @property
    def inputs(self) -> list[str]:
        """The embedding inputs of this request, as a list."""
        value = self.body.get("input", []) if isinstance(self.body, dict) else []
        return [value] if isinstance(value, str) else list(value)


@dataclass
class _Failure:
    status: int
    retry_after: str | None
    path: str | None
    after: int
    message: str


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    failures: list[_Failure] = field(default_factory=list)
    reject_substrings: list[tuple[str, int]] = field(default_factory=list)
    chat_replies: list[str] = field(default_factory=list)  # scripted contents, in order
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeProviderServer:
    """Threaded HTTP server on 127.0.0.1 with a random free port.

    ``openai_base_url`` / ``voyage_base_url`` are what to pass as ``base_url`` to the clients.
    """

    def __init__(self) -> None:
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeProviderServer:
        """Bind and serve in a background thread."""
        state = self._state

        class Handler(_Handler):
            pass

        Handler.state = state
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = False  # so server_close() joins every handler thread
        httpd.block_on_close = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def script_chat(self, *contents: str) -> None:
        """Queue ``contents`` as the next chat completions' message contents (verbatim, e.g.
        a structured-output JSON body); once the queue is empty the default fake answers."""
        with self._state.lock:
            self._state.chat_replies.extend(contents)

    def stop(self) -> None:
        """Stop serving and join the server and all handler threads."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd, self._thread = None, None

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def voyage_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # ------------------------------------------------------------------ scripting

    def fail_next(
        self,
        status: int = 429,
        retry_after: str | None = None,
        *,
        times: int = 1,
        path: str | None = None,
        after: int = 0,
        message: str = "scripted failure",
    ) -> None:
        """Fail the next ``times`` requests (to ``path``, if given) with ``status``.

        ``after`` lets that many matching requests through first. ``retry_after`` is sent
        verbatim as the ``Retry-After`` header (seconds or an HTTP date).
        """
        with self._state.lock:
            for k in range(times):
                self._state.failures.append(
                    _Failure(status, retry_after, path, after if k == 0 else 0, message)
                )

    def reject_inputs_containing(self, substring: str, status: int = 400) -> None:
        """Answer ``status`` to any embedding request with an input containing ``substring``."""
        with self._state.lock:
            self._state.reject_substrings.append((substring, status))

    def reset(self) -> None:
        """Forget recorded requests and scripted failures."""
        with self._state.lock:
            self._state.requests.clear()
            self._state.failures.clear()
            self._state.reject_substrings.clear()

    # ------------------------------------------------------------------ inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def embedding_requests(self, api: str | None = None) -> list[RecordedRequest]:
        """Recorded ``/embeddings`` requests, optionally only ``"openai"`` or ``"voyage"``."""
        return [
            r
            for r in self.requests
            if r.path.endswith("/embeddings") and (api is None or r.api == api)
        ]

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def sent_inputs(self, *, ok_only: bool = True) -> list[str]:
        """Every embedding input the server answered (or, with ok_only=False, received)."""
        return [
            text
            for r in self.embedding_requests()
            if not ok_only or r.status == 200
            for text in r.inputs
        ]


_Reply = tuple[int, Any, "dict[str, str] | None"]


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no handler thread lingers on keep-alive.
    protocol_version = "HTTP/1.0"
    state: _State

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _error(status: int, message: str, headers: dict[str, str] | None = None) -> _Reply:
        # "error" is what openai parses, "detail" what voyageai parses.
        payload = {
            "error": {"message": message, "type": "invalid_request_error", "code": None},
            "detail": message,
        }
        return status, payload, headers

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        api = ""
        if path.endswith("/embeddings"):
            api = "voyage" if isinstance(body, dict) and _VOYAGE_KEYS & body.keys() else "openai"
        elif path.endswith("/chat/completions"):
            api = "openai"
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = RecordedRequest("POST", path, headers, body, 0, api)
        state = self.state
        with state.lock:
            state.requests.append(record)
            failure = self._take_failure(path)
        if failure is not None:
            extra = {"Retry-After": failure.retry_after} if failure.retry_after else None
            reply = self._error(failure.status, failure.message, extra)
        elif path.endswith("/embeddings"):
            reply = self._embeddings(body, voyage=api == "voyage", record=record)
        elif path.endswith("/chat/completions"):
            reply = self._chat(body)
        else:
            reply = self._error(404, f"no route for {path}")
        record.status = reply[0]  # before replying, so the client never sees it unset
        self._send(*reply)

    def _take_failure(self, path: str) -> _Failure | None:
        for k, f in enumerate(self.state.failures):
            if f.path is not None and not path.endswith(f.path):
                continue
            if f.after > 0:
                f.after -= 1
                return None
            return self.state.failures.pop(k)
        return None

    def _embeddings(self, body: dict, *, voyage: bool, record: RecordedRequest) -> _Reply:
        inputs = record.inputs
        limit = VOYAGE_MAX_INPUTS if voyage else OPENAI_MAX_INPUTS
        if not inputs or len(inputs) > limit:
            return self._error(400, f"input must have 1..{limit} items, got {len(inputs)}")
        if not voyage and any(not t for t in inputs):
            return self._error(400, "input cannot contain empty strings")
        with self.state.lock:
            rejects = list(self.state.reject_substrings)
        for substring, status in rejects:
            if any(substring in t for t in inputs):
                return self._error(status, f"input rejected: contains {substring!r}")
        model = body.get("model", "")
        if voyage:
            dim = body.get("output_dimension") or VOYAGE_DIMS.get(model, 1024)
        else:
            dim = body.get("dimensions") or OPENAI_DIMS.get(model, 1536)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = fake_vector(text, int(dim))
            emb: Any = (
                base64.b64encode(vec.astype("<f4").tobytes()).decode()
                if as_base64
                else [float(x) for x in vec]
            )
            data.append({"object": "embedding", "embedding": emb, "index": i})
        tokens = sum(fake_token_count(t) for t in inputs)
        usage = (
            {"total_tokens": tokens}
            if voyage
            else {"prompt_tokens": tokens, "total_tokens": tokens}
        )
        return 200, {"object": "list", "data": data, "model": model, "usage": usage}, None

    def _chat(self, body: dict) -> _Reply:
        with self.state.lock:
            scripted = self.state.chat_replies.pop(0) if self.state.chat_replies else None
        if scripted is not None:  # script_chat(): the content verbatim (e.g. a JSON answer)
            return 200, _completion(body, scripted), None
        messages = body.get("messages") or []
        user = next(
            (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        if not isinstance(user, str):
            user = json.dumps(user)
        with self.state.lock:
            rejects = list(self.state.reject_substrings)
        for substring, status in rejects:
            if substring in user:
                return self._error(status, f"input rejected: contains {substring!r}")
        return 200, _completion(body, fake_summary(user)), None


def _completion(body: dict, content: str) -> dict:
    """A chat.completion response carrying ``content``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
