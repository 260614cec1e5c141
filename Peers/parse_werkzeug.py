"""Parses multipart bodies with Werkzeug's multipart decoder, the parser behind Flask's request.files.

Usage: python3 parse_werkzeug.py MANIFEST.json
  MANIFEST: [{"path": "...", "contentType": "multipart/form-data; boundary=..."}]
  Prints, for each body in order, {"parts": [{name, fileName, contentType, headers, body (base64)}]} or
  {"error": "..."}; headers are [name, value] pairs in order. Other multipart/ subtypes are parsed by Python's
  own email package; a part with no name parameter gets the name "".
Usage: python3 parse_werkzeug.py serve
  Serves on 127.0.0.1 with Werkzeug's own HTTP server, printing its port on the first line; each request is
  answered with {method, transferEncoding, contentLength, contentType, bytes, parts} (400 with {error}).
  Exits when stdin closes.
"""
import base64
import json
import sys

from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData


def parse(body, content_type):
    mimetype, options = parse_options_header(content_type)
    if not mimetype.startswith("multipart/") or "boundary" not in options:
        raise ValueError(f"not a multipart content type: {content_type}")
    if mimetype != "multipart/form-data":
        return parse_email(body, content_type)
    decoder = MultipartDecoder(options["boundary"].encode())
    decoder.receive_data(body)
    decoder.receive_data(None)
    parts, current, chunks = [], None, []
    while True:
        event = decoder.next_event()
        if isinstance(event, (Field, File)):
            current = {
                "name": event.name or "",
                "contentType": event.headers.get("Content-Type"),
                "headers": [[name, value] for name, value in event.headers.items()],
            }
            if isinstance(event, File):
                current["fileName"] = event.filename
            chunks = []
        elif isinstance(event, Data):
            chunks.append(event.data)
            if not event.more_data:
                current["body"] = base64.b64encode(b"".join(chunks)).decode()
                parts.append(current)
        elif isinstance(event, Epilogue):
            return parts
        elif isinstance(event, NeedData):
            raise ValueError("body ended before the close delimiter")


def parse_email(body, content_type):
    """Other subtypes (mixed, related, alternative…) with Python's own email package: Werkzeug reads form-data only."""
    import email
    import email.policy

    message = email.message_from_bytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body, policy=email.policy.compat32
    )
    if not message.is_multipart() or message.defects:
        raise ValueError(f"email could not parse the body: {message.defects}")
    parts = []
    for part in message.get_payload():
        parts.append({
            "name": part.get_param("name", header="content-disposition") or "",
            "fileName": part.get_filename(),
            "contentType": part.get("Content-Type"),
            "headers": [[name, str(value)] for name, value in part.items()],
            "body": base64.b64encode(part.get_payload(decode=True) or b"").decode(),
        })
    return parts


def parse_files(manifest_path):
    results = []
    for entry in json.load(open(manifest_path)):
        try:
            with open(entry["path"], "rb") as f:
                results.append({"parts": parse(f.read(), entry["contentType"])})
        except Exception as error:  # reported per body, so one bad body does not hide the others
            results.append({"error": f"{type(error).__name__}: {error}"})
    print(json.dumps(results))


def serve():
    import threading

    from werkzeug.serving import make_server
    from werkzeug.wrappers import Request, Response

    @Request.application
    def app(request):
        body = request.get_data()
        seen = {
            "method": request.method,
            "transferEncoding": request.headers.get("Transfer-Encoding"),
            "contentLength": request.headers.get("Content-Length"),
            "contentType": request.headers.get("Content-Type"),
            "bytes": len(body),
        }
        try:
            seen["parts"] = parse(body, seen["contentType"] or "")
            status = 200
        except Exception as error:
            seen["error"] = f"{type(error).__name__}: {error}"
            status = 400
        return Response(json.dumps(seen), status=status, content_type="application/json")

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(server.server_port, flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if sys.argv[1] == "serve":
    serve()
else:
    parse_files(sys.argv[1])
