"""An OTLP/HTTP traces endpoint on loopback that keeps every decoded export request (the service's and the CLI's
span export are checked against it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

__all__ = ["OtlpReceiver", "Received", "attributes", "otlp_receiver", "value"]


@dataclass
class Received:
    headers: dict[str, str]
    request: ExportTraceServiceRequest


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP traces endpoint on loopback that keeps every decoded export request."""

    exports: list[Received] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spans(self) -> list[tuple[dict[str, Any], str, Span]]:
        """(resource attributes, scope name, span) of every span received."""
        out: list[tuple[dict[str, Any], str, Span]] = []
        for received in self.exports:
            for resource_spans in received.request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    out.extend((resource, scope_spans.scope.name, span) for span in scope_spans.spans)
        return out

    def wait_for_spans(self, count: int, timeout: float = 60.0) -> None:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.spans()) >= count, timeout)


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with receiver.arrived:
                receiver.paths.append(self.path)
                receiver.exports.append(Received({k.lower(): v for k, v in self.headers.items()}, request))
                receiver.arrived.notify_all()
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def attributes(items: Any) -> dict[str, Any]:
    return {item.key: value(item.value) for item in items}
