"""Parses multipart bodies with Werkzeug's multipart decoder, the parser behind Flask's request.files.

Usage: python3 parse_werkzeug.py MANIFEST.json
MANIFEST: [{"path": "...", "contentType": "multipart/form-data; boundary=..."}]
Prints, for each body in order, {"parts": [{name, fileName, contentType, body (base64)}]} or {"error": "..."}.
"""
import base64
import json
import sys

from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData


def parse(body, content_type):
    mimetype, options = parse_options_header(content_type)
    if mimetype != "multipart/form-data" or "boundary" not in options:
        raise ValueError(f"not a multipart content type: {content_type}")
    decoder = MultipartDecoder(options["boundary"].encode())
    decoder.receive_data(body)
    decoder.receive_data(None)
    parts, current, chunks = [], None, []
    while True:
        event = decoder.next_event()
        if isinstance(event, (Field, File)):
            current = {"name": event.name, "contentType": event.headers.get("Content-Type")}
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


results = []
for entry in json.load(open(sys.argv[1])):
    try:
        with open(entry["path"], "rb") as f:
            results.append({"parts": parse(f.read(), entry["contentType"])})
    except Exception as error:  # reported per body, so one bad body does not hide the others
        results.append({"error": f"{type(error).__name__}: {error}"})
print(json.dumps(results))
