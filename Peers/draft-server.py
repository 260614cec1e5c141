"""A scripted server of draft-ietf-httpbis-resumable-upload on 127.0.0.1, for tests.

It speaks the interop versions of its first argument (6 to 10, one or several with commas, `6,10` as the draft's
editor's example middleware does; 10 when none is given), each answer in the version of its request, and answers a
request in any other version as an ordinary server would: OPTIONS without the draft's fields, a POST as the whole
form, the upload resources not found; a server that speaks 10 answers such a request 400 without the draft's fields
instead, as that middleware does. In its versions it answers as the draft allows but as SwiftNIO's NIOResumableUpload
never does (with `--name-on-refusal` after the versions, a request in another version is refused 400 naming the
newest of them, as NIOResumableUpload refuses a newer client), one scenario at a time: the scenario is the last path segment of the URL a client starts from
(`/s/NAME`), and every upload it creates behaves that way. It listens on two ports: the first line of stdout is `PORT ALT`; an upload
resource is at `http://127.0.0.1:PORT/u/ID`, or on ALT (another origin) in the `other-origin` scenario. It exits when
stdin closes.

What each version changes here: 6 names the lifetime `expires`, 7 to 9 `max-age`, 10 `expires` again (as the editor's
middleware does); from 8 on, OPTIONS also answers `Accept-Patch: application/partial-upload`, and an append that
carries more than 64 KiB gets a `104 (Upload Resumption Supported)` interim answer with the offset before its final
one. In 10, the offset is asked with HEAD or GET, whose 204 also says Upload-Length and Upload-Limit; a PATCH without
Upload-Complete is refused with 400; and Upload-Complete: ?1 marks the application's answer even when it came before
the whole upload (the early-400 scenario).

Scenarios (the default answers as the draft's examples do; the others change one thing):
  Every answer of 300 or more to a PATCH carries a body (`STATUS to an append: not the answer`) unless the scenario
  gives one: only the application's answer may reach a caller.
  default               OPTIONS 200 with Upload-Limit; creation 201 with Location, Upload-Complete: ?0, offset 0;
                        PATCH stores the bytes and, once all are there with ?1, answers the application's 200 (a JSON
                        {bytes, sha256} of the form) with Upload-Complete: ?1; HEAD 204 with the offset
  other-origin          the upload resource is on the other port
  complete-409          the application answers 409 with Upload-Complete: ?1
  complete-404          the application answers 404 with Upload-Complete: ?1
  complete-503          the application answers 503 with Upload-Complete: ?1
  incomplete-204        the first PATCH keeps half the bytes and answers 204 with Upload-Complete: ?0, no offset
  redirect-307          the first PATCH answers 307 to another URL of the same upload, keeping nothing
  conflict-409          the first PATCH keeps half the bytes and answers 409 with Upload-Offset and Upload-Complete: ?0
  partial-200           the first PATCH keeps half the bytes and answers 200 with Upload-Offset and Upload-Complete: ?0
  creation-201          the creation answer has Location only: no Upload-Complete, no Upload-Offset
  max-size              OPTIONS says max-size=100
  min-size              OPTIONS says min-size=1000000000; a plain POST of the whole form is the application's
  min-size-N            the same with min-size=N: a form of N bytes or more is an upload resource, as usual
  head-503              the first PATCH keeps half and drops the connection; the first HEAD answers 503,
                        Retry-After: 0
  patch-503             the first PATCH keeps half and answers 503 without Upload-Complete
  offset-down           the first PATCH keeps 60% and drops; the next keeps nothing and drops; HEADs then say 10%
  creation-offset       the creation answers Upload-Offset: length - 100
  all-bytes-incomplete  the first PATCH keeps every byte and drops without answering; HEAD says ?0 at the length
  slow                  PATCH reads 64 KiB every 50 ms, appending each as it comes (so the offset grows while a
                        request whose client is gone drains); a newer PATCH to the upload takes over, and the
                        older one stops, as it does when the upload is deleted
  slow-relative         as slow, with the creation's Location as relative-location's (through a proxy)
  paced                 as slow, but every paced upload shares one link of 10 MB/s, read 64 KiB at a time
  max-append            OPTIONS says max-append-size=100000
  max-append-drop       as max-append, and the second PATCH keeps half its bytes and drops the connection
  too-large             a PATCH of more than 120000 bytes is refused with 413, its body read and dropped
  stall                 the first PATCH of the server's first upload keeps 1 MiB, then stops reading without closing,
                        until the next append to the upload comes (or 120 s), then drops
  token-once            every request must carry `Authorization: Bearer T` with a T no request carried before, else
                        401 (the body read and dropped)
  auth                  PATCH without `Authorization: Basic dTpw` (u:p) is refused with 401 and a Basic challenge,
                        its body read and dropped
  proxy-407             as a proxy that wants `Proxy-Authorization: Basic dTpw` (u:p) would: every request to the
                        upload (PATCH, HEAD, DELETE) without it is refused with 407 and a Basic challenge, its body
                        read and dropped
  complete-no-field     the application answers 200 without Upload-Complete (allowed in 6, a breach from 7 on)
  min-append            OPTIONS says min-append-size=100000 and max-append-size=1000000
  conflicting-limits    OPTIONS says min-append-size=2000 and max-append-size=1000
  too-large-min         as too-large, and OPTIONS says min-append-size=100000
  drop-last             the first PATCH with Upload-Complete: ?1 keeps half its bytes and drops the connection
  drop-at-end           the first PATCH with Upload-Complete: ?1 keeps every byte and drops without answering (the
                        server has the whole form, not yet complete)
  drop-at-end-no-field  as drop-at-end, and every HEAD leaves Upload-Complete out (allowed in 6, a breach from 7 on)
  gone-second           the second PATCH to an upload answers 404, and the upload is gone
  drop-twice            the first two PATCHes each keep a third of what they carry and drop the connection
  early-400             the application refuses the form after the first 100000 bytes of a PATCH: 400 with
                        Upload-Complete: ?1 and a body of its own, the rest unread (the connection closed); it never
                        processes the form
  early-200             as early-400, but the answer is 200 with Upload-Complete: ?1: a success claimed for a form the
                        server cannot have
  refused-whole         OPTIONS says max-append-size=100000; the application refuses the form once the first PATCH's
                        body (Upload-Complete: ?0) is read whole: 400 with Upload-Complete: ?1 and a 14-byte body,
                        the connection kept alive; it never processes the form
  refuse-S-W-C[-last]   the application refuses the form with status S (any, 400 and above) and Upload-Complete: ?1
                        and a body naming S, in the first PATCH: W `mid` after its first 50000 bytes, `whole` once
                        its body is read; C `close` closing the connection (what the client still sends is read and
                        dropped), `keep` keeping it alive (the rest of the body read first); OPTIONS says
                        max-append-size=100000 (that PATCH says Upload-Complete: ?0) but with `-last`, whose one PATCH
                        is the last (?1); it never processes the form
  create-refused-S      the application refuses the form with status S (any, 400 and above) and a JSON body
                        {"refused": S} at once: to the creation (its body, if any, read first) and to a plain POST of
                        the whole form alike; it never processes the form
  legacy-head           the first PATCH keeps every byte it carries and answers 503 (Retry-After: 0) without
                        Upload-Complete; every HEAD then answers 204 at that offset with Upload-Incomplete: ?0 (the
                        field of versions before 5) and no Upload-Complete; it never processes the form
  complete-short        as legacy-head, but every HEAD answers 204 with Upload-Complete: ?1, an Upload-Offset 1000
                        bytes short of the Upload-Length it also gives; it never processes the form
  complete-dropped      a creation that carries the whole form (Upload-Complete: ?1, as long as its Upload-Length) is
                        processed and its connection dropped without an answer, the first with each Idempotency-Key;
                        without it such a creation is processed and answered as the last append is (200 with
                        Upload-Complete: ?1, or as complete-409, complete-404, complete-503 and complete-no-field say)
  plain-lost            a plain POST is processed and its answer never comes (as plain-first), the first with each
                        Idempotency-Key
  plain-first           until a plain POST has brought the whole form, OPTIONS answers as a server without the draft;
                        that POST's form is processed (listed in /forms), and its answer never comes: the server
                        waits for the client to go (at most 30 s), then drops the connection. Then, the default

Scenarios that lie (a server's answers are untrusted input; the client must neither trap nor take them as success):
  hostile               while GET /hostile/SEED has turned it on (GET /calm turns it off, and it answers as the
                        default), each request draws its answer at random from SEED: OPTIONS without the draft (the
                        form goes whole); a plain POST processed, then answered, dropped, or left unanswered until the
                        client goes; a creation answered 503 or dropped; a PATCH that keeps a random part and drops,
                        that completes the form (processed) and drops, or answers 503 or 200 without Upload-Complete;
                        a HEAD that leaves Upload-Complete out, says it in a value that is no boolean, answers 202
                        without it, or 503. It never says ?1 for a form the application did not process
  lie-complete-length   OPTIONS says max-append-size=100000; the first PATCH (Upload-Complete: ?0) keeps its bytes
                        and answers 200 with Upload-Complete: ?1 and the form's whole length as its offset
  lie-complete-negative the same, with Upload-Offset: -9999
  lie-complete-none     the same, 204 with Upload-Complete: ?1 and no offset
  empty-413             a PATCH with bytes keeps them and answers 204 ?0 at the stored offset, even when it said ?1;
                        an empty PATCH (the last, ?1, at the form's end) answers 413
  complete-then-drop    the PATCH that completes the form is processed by the application (listed in /forms), then
                        the connection drops without an answer; HEAD says Upload-Complete: ?1 at the full length
  relative-location     the creation answers Location: /u/ID, on the origin the request came to (through a proxy)
  location-no-host      the creation answers Location: http:///u/ID (no host)
  location-userinfo     the creation answers Location: http://u:p@127.0.0.1:PORT/u/ID
  location-ftp          the creation answers Location: ftp://127.0.0.1:PORT/u/ID
  location-https-plain  the creation answers Location: https://127.0.0.1:PORT/u/ID, on the port that speaks plain HTTP
  location-huge         the creation answers a Location of 100,000 characters
  huge-500              every PATCH keeps nothing and answers 500 with a body of 2 GiB (GET /huge: what each put on
                        the wire, and whether the client hung up first)
  redirect-away         OPTIONS and POST to the start URL answer 307 with the scheme-relative Location
                        //127.0.0.1:ALT/s/default (another origin); the upload is then created on the first port

A scenario that draws every answer (the differential test's server; never a lie the client could not tell):
  chaos-SEED-TAG        each request to the start URL or to an upload made from it draws its answer, in the order
                        the requests come, from a generator of its own seeded with SEED (so that clients that send the
                        same requests to two TAGs get the same answers): OPTIONS with the draft's fields, without them,
                        or any status; a creation answered honestly, with any status and Upload-Complete present,
                        absent, invalid or legacy, or dropped; a plain POST of the whole form processed and answered
                        with any status, or dropped, or refused unprocessed (never a 2xx for a form it did not
                        process); a PATCH that keeps all or part of its bytes, then answers honestly, with any status
                        and field (a ?1 before the client's last byte included), or drops; a HEAD answered honestly,
                        with Upload-Incomplete (the field of versions before 5), no field, an invalid one, ?1 short of
                        the form's length, 503 or 404. It never says the form is complete where the client could not
                        tell otherwise: a 2xx with ?1 (or, in version 6, without the field, or Upload-Incomplete: ?0)
                        to the append that brings the last byte, or ?1 at the form's length to a HEAD, only once the
                        application processed the form. GET /answers lists each answer the application gave:
                        {tag, sha256, status} (status 0: processed, its answer dropped).

An upload created without Upload-Length has the length its completing append (Upload-Complete: ?1) gives it.

It honours Idempotency-Key (draft-ietf-httpapi-idempotency-key-header), as a server that makes "at least once"
exactly once does: a creation request, or a plain POST of the whole form, whose key it has seen on a request of the
same kind is answered as that request was, and creates or processes nothing. GET /keys/ignore on the other port
makes it forget every key and ignore them from then on, as a server without that support (NIOResumableUpload).

GET /down on the other port closes the first port's listener, so that connections to it are refused (the uploads
are kept); GET /up there opens it again on the same port.

GET /log lists every request: {method, path, port, authorization, cookie, offset, complete, version, bytes,
length (its Upload-Length), idempotency (its Idempotency-Key), interims (the 104 answers it got), scenario (its
start URL's or its upload's), status (of its answer: 0 where the connection was dropped, null where none went out)};
GET /forms lists the forms the application processed: {bytes, sha256}; GET /in-flight says how many uploads had an
append being read at once, at most: {most}.
"""
import hashlib
import http.server
import json
import random
import socket
import socketserver
import sys
import threading
import time

# Reentrant: an answer notes its status under the lock, and a handler may answer while it holds it.
lock = threading.RLock()
log = []
forms = []
huge_answers = []
# The uploads with an append being read (counted, since a newer append may take over from an older one), and the
# most there were at once.
in_flight = {"uploads": {}, "most": 0}
# When the paced scenario's shared link is next free (time.monotonic()).
link = {"free": 0.0}
uploads = {}
next_id = [0]
used_tokens = set()
ports = {}
# Whether the plain-first scenario's plain POST has come, and the Idempotency-Keys whose plain-lost POST was lost.
plain_first = {"done": False, "lost": set()}
# The hostile scenario's draws, while it is on.
hostile = {"random": None}
# The chaos scenario's generators, by its name, and the application's answers: {tag, sha256, status}.
chaos = {}
chaos_answers = []
# The Idempotency-Keys whose complete-dropped creation was processed and its connection dropped.
complete_dropped = set()
# The answers given to each Idempotency-Key, by the kind of request ("creation" or "plain"): status, headers, body.
idempotency = {"honoured": True, "creation": {}, "plain": {}}
versions = {int(v) for v in sys.argv[1].split(",")} if len(sys.argv) > 1 else {10}
# `--name-on-refusal`: a request in another version is refused 400 naming the newest of the server's, as SwiftNIO's
# NIOResumableUpload answers a client newer than itself.
names_on_refusal = "--name-on-refusal" in sys.argv[2:]


def form_answer(upload):
    body = bytes(upload["data"])
    digest = hashlib.sha256(body).hexdigest()
    forms.append({"bytes": len(body), "sha256": digest})
    return json.dumps({"bytes": len(body), "sha256": digest}).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def scenario(self):
        """The scenario of this request: its start URL's, or its upload's (None for an upload it does not have)."""
        if self.path.startswith("/u/"):
            upload = uploads.get(self.path.split("/")[-1])
            return upload["scenario"] if upload else None
        return self.path.split("/")[-1]

    def entry(self, bytes_read):
        scenario = self.scenario()
        with lock:
            log.append({
                "method": self.command, "path": self.path, "port": self.server.server_address[1],
                "authorization": self.headers.get("Authorization"), "cookie": self.headers.get("Cookie"),
                "offset": self.headers.get("Upload-Offset"), "complete": self.headers.get("Upload-Complete"),
                "version": self.headers.get("Upload-Draft-Interop-Version"), "bytes": bytes_read,
                "length": self.headers.get("Upload-Length"), "idempotency": self.headers.get("Idempotency-Key"),
                "interims": getattr(self, "interims", 0), "scenario": scenario, "status": None,
            })
            # The answer's status is noted as it goes out (answer, drop): 0 where the connection was dropped.
            self.logged = log[-1]
        self.interims = 0

    def answer(self, status, headers=None, body=b""):
        if getattr(self, "logged", None) is not None:
            with lock:
                self.logged["status"] = status
            self.logged = None
        if not body and self.command == "PATCH" and status >= 300:
            # Every answer to an append that is not the application's carries a body, which must reach no caller.
            body = f"{status} to an append: not the answer\n".encode()
        self.send_response(status)
        if self.speaks_draft():
            self.send_header("Upload-Draft-Interop-Version", str(self.version()))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def huge_answer(self, status, length):
        """Answers `status` with `length` bytes, noting how many went out before the client hung up."""
        self.send_response(status)
        self.send_header("Upload-Draft-Interop-Version", str(self.version()))
        self.send_header("Content-Length", str(length))
        self.end_headers()
        block = bytes(1 << 20)
        sent = {"bytes": 0, "hungUp": False}
        with lock:
            huge_answers.append(sent)
        started = time.monotonic()
        try:
            while sent["bytes"] < length:
                self.wfile.write(block[: min(len(block), length - sent["bytes"])])
                sent["bytes"] += min(len(block), length - sent["bytes"])
                # At most 125 MB a second, a gigabit link's pace, as Peers/big-answer.mjs writes and for the same
                # reason.
                ahead = sent["bytes"] / 125_000_000 - (time.monotonic() - started)
                if ahead > 0.005:
                    time.sleep(ahead)
        except OSError:
            sent["hungUp"] = True
            self.close_connection = True

    def drop(self):
        """Ends the connection without an answer, as a network failure would."""
        if getattr(self, "logged", None) is not None:
            with lock:
                self.logged["status"] = 0
            self.logged = None
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def read(self, limit=None):
        length = int(self.headers.get("Content-Length") or 0)
        wanted = length if limit is None else min(limit, length)
        data = bytearray()
        while len(data) < wanted:
            try:
                chunk = self.rfile.read(min(65536, wanted - len(data)))
            except (ConnectionError, OSError):
                # A connection reset mid-body: the server keeps what it read, as the draft lets it.
                chunk = b""
            if not chunk:
                break
            data += chunk
        return bytes(data), length

    def refuse(self, scenario):
        """The refuse-S-W-C[-last] scenario's answer to the first PATCH."""
        _, status, when, connection = scenario.split("-")[:4]
        data, declared = self.read(limit=50000 if when == "mid" else None)
        self.entry(len(data))
        headers = {"Upload-Complete": "?1", "Content-Type": "text/plain"}
        if connection == "close":
            self.close_connection = True
            headers["Connection"] = "close"
        self.answer(int(status), headers, f"refused with {status}".encode())
        self.wfile.flush()
        # The rest of the body, read and dropped: on a kept-alive connection, so that the next request is read from
        # its start; on one that closes, so that the answer is not lost to a reset.
        if not self.drop_rest(declared - len(data)):
            self.close_connection = True

    def drop_rest(self, left):
        """Reads and drops the `left` bytes of the body the client still sends, for 5 s at most; whether it read them
        all."""
        self.connection.settimeout(5)
        try:
            while left > 0:
                chunk = self.rfile.read(min(65536, left))
                if not chunk:
                    return False
                left -= len(chunk)
            return True
        except OSError:
            return False
        finally:
            self.connection.settimeout(None)

    def draw(self, scenario, *choices):
        """The hostile scenario's answer to this request, drawn from `choices`; None while it is off."""
        with lock:
            if scenario != "hostile" or hostile["random"] is None:
                return None
            return hostile["random"].choice(choices)

    def unanswered(self):
        """Leaves the request unanswered until the client goes (at most 30 s), then drops the connection."""
        self.connection.settimeout(30)
        try:
            self.rfile.read(1)
        except OSError:
            pass
        return self.drop()

    def upload(self):
        return uploads.get(self.path.split("/")[-1]) if self.speaks_draft() else None

    def speaks_draft(self):
        """Whether the request is in one of the server's versions: any other is an ordinary request."""
        return self.version() is not None

    def version(self):
        """The request's interop version, where the server speaks it."""
        named = self.headers.get("Upload-Draft-Interop-Version")
        return int(named) if named in {str(v) for v in versions} else None

    def interim(self, offset):
        """A 104 interim answer with the offset so far, as versions 8 and later describe."""
        self.wfile.write(f"HTTP/1.1 104 Upload Resumption Supported\r\nUpload-Draft-Interop-Version: {self.version()}\r\n"
                         f"Upload-Offset: {offset}\r\n\r\n".encode())
        self.wfile.flush()
        self.interims = getattr(self, "interims", 0) + 1

    def do_GET(self):
        if self.path.startswith("/u/") and self.version() == 10:
            # Version 10 asks the offset with GET as with HEAD.
            return self.do_HEAD()
        if self.path == "/log":
            with lock:
                body = json.dumps(log).encode()
        elif self.path == "/answers":
            with lock:
                body = json.dumps(chaos_answers).encode()
        elif self.path == "/forms":
            with lock:
                body = json.dumps(forms).encode()
        elif self.path == "/in-flight":
            with lock:
                body = json.dumps({"most": in_flight["most"]}).encode()
        elif self.path == "/huge":
            with lock:
                body = json.dumps(huge_answers).encode()
        elif self.path == "/keys/ignore":
            with lock:
                idempotency.update({"honoured": False, "creation": {}, "plain": {}})
            body = b"{}"
        elif self.path.startswith("/hostile/") or self.path == "/calm":
            with lock:
                hostile["random"] = random.Random(int(self.path.split("/")[-1])) if self.path != "/calm" else None
            body = b"{}"
        elif self.path in ("/down", "/up") and self.server.server_address[1] == ports["alt"]:
            listen(self.path == "/up")
            body = b"{}"
        else:
            return self.answer(404)
        self.answer(200, {"Content-Type": "application/json"}, body)

    def parse_request(self):
        """Refuses, before any method sees it, a request to an upload of the `proxy-407` scenario without its proxy
        credential (407), and a request of the `token-once` scenario (to its start URL or to one of its uploads)
        whose bearer token is missing or was used before (401); the body of either is read and dropped."""
        if not super().parse_request():
            return False
        named = self.headers.get("Upload-Draft-Interop-Version")
        if named is not None and not self.speaks_draft() and self.command != "GET":
            if names_on_refusal:
                data, _ = self.read()
                self.entry(len(data))
                self.answer(400, {"Upload-Draft-Interop-Version": str(max(versions))})
                return False
            if 10 in versions:
                # A version it does not speak: 400 without the draft's fields, as the editor's middleware answers.
                data, _ = self.read()
                self.entry(len(data))
                self.answer(400)
                return False
        upload = uploads.get(self.path.split("/")[-1]) if self.path.startswith("/u/") else None
        scenario = upload["scenario"] if upload else self.path.split("/")[-1]
        if scenario == "proxy-407" and upload and self.headers.get("Proxy-Authorization") != "Basic dTpw":
            data, _ = self.read()
            self.entry(len(data))
            self.answer(407, {"Proxy-Authenticate": 'Basic realm="proxy"'})
            return False
        if scenario != "token-once" or self.command == "GET" or not self.speaks_draft():
            return True
        token = self.headers.get("Authorization")
        with lock:
            reused = token is None or token in used_tokens
            used_tokens.add(token)
        if not reused:
            return True
        data, _ = self.read()
        self.entry(len(data))
        self.answer(401)
        return False

    def redirects_away(self):
        """The `redirect-away` scenario's 307 from the start URL to the same scenario's default on the other port."""
        if not self.path.endswith("/s/redirect-away"):
            return False
        self.read()
        self.answer(307, {"Location": f"//127.0.0.1:{ports['alt']}/s/default"})
        return True

    def do_OPTIONS(self):
        if self.chaos_scenario():
            return self.chaos_options()
        self.entry(0)
        if self.redirects_away():
            return
        scenario = self.path.split("/")[-1]
        plain = self.draw(scenario, "draft", "draft", "plain") == "plain"
        if not self.speaks_draft() or scenario == "plain-first" and not plain_first["done"] or plain:
            return self.answer(200, {"Allow": "OPTIONS, GET, POST"})
        limit = {"max-size": "max-size=100", "min-size": "min-size=1000000000",
                 "max-append": "max-append-size=100000", "max-append-drop": "max-append-size=100000",
                 "min-append": "min-append-size=100000, max-append-size=1000000",
                 "conflicting-limits": "min-append-size=2000, max-append-size=1000",
                 "too-large-min": "min-append-size=100000",
                 "lie-complete-length": "max-append-size=100000", "lie-complete-negative": "max-append-size=100000",
                 "lie-complete-none": "max-append-size=100000", "refused-whole": "max-append-size=100000"}.get(scenario, "")
        if scenario.startswith("refuse-") and not scenario.endswith("-last"):
            limit = "max-append-size=100000"
        if scenario.startswith("min-size-"):
            limit = f"min-size={int(scenario.split('-')[2])}"
        lifetime = f"{'expires' if self.version() in (6, 10) else 'max-age'}=3600"
        headers = {"Upload-Limit": f"{limit}, {lifetime}" if limit else lifetime}
        if self.version() >= 8:
            headers["Accept-Patch"] = "application/partial-upload"
        self.answer(200, headers)

    def do_POST(self):
        if self.chaos_scenario():
            return self.chaos_post()
        scenario = self.path.split("/")[-1]
        if scenario == "redirect-away":
            self.entry(0)
            return self.redirects_away()
        plain = self.headers.get("Upload-Complete") is None or not self.speaks_draft()
        if self.replayed("plain" if plain else "creation"):
            return
        if scenario.startswith("create-refused-"):
            data, _ = self.read()
            self.entry(len(data))
            status = int(scenario.split("-")[-1])
            return self.answer(status, {"Content-Type": "application/json"}, json.dumps({"refused": status}).encode())
        if plain:
            # A plain request: the whole form, the application's. A body cut short (the connection ended before its
            # Content-Length, a client killed mid-send) is no request: no application gets it, and no answer is kept
            # for its key, which a later request with the whole form would be answered from.
            data, declared = self.read()
            self.entry(len(data))
            if len(data) < declared:
                return self.drop()
            with lock:
                body = form_answer({"data": data})
                self.remember("plain", 200, {"Content-Type": "application/json"}, body)
                key = self.headers.get("Idempotency-Key")
                lost = (scenario == "plain-first" and not plain_first["done"]
                        or scenario == "plain-lost" and key not in plain_first["lost"])
                plain_first["done"] = True
                plain_first["lost"].add(key)
            hostile_answer = self.draw(scenario, "answer", "drop", "unanswered")
            if lost or hostile_answer == "unanswered":
                # Processed, and the answer lost: wait for the client to go.
                return self.unanswered()
            if hostile_answer == "drop":
                return self.drop()
            return self.answer(200, {"Content-Type": "application/json"}, body)
        data, _ = self.read()
        self.entry(len(data))
        hostile_answer = self.draw(scenario, "ok", "ok", "503", "drop")
        if hostile_answer == "503":
            return self.answer(503)
        if hostile_answer == "drop":
            return self.drop()
        if self.headers.get("Upload-Complete") == "?1" and len(data) == int(self.headers.get("Upload-Length") or -1):
            # The whole upload in its creation: the application's answer at once, as to the last append.
            with lock:
                body = form_answer({"data": data})
                status = {"complete-409": 409, "complete-404": 404, "complete-503": 503}.get(scenario, 200)
                headers = {"Content-Type": "application/json", "Upload-Complete": "?1"}
                if scenario == "complete-no-field":
                    headers = {"Content-Type": "application/json"}
                self.remember("creation", status, headers, body)
                key = self.headers.get("Idempotency-Key")
                dropped = scenario == "complete-dropped" and key not in complete_dropped
                complete_dropped.add(key)
            return self.drop() if dropped else self.answer(status, headers, body)
        with lock:
            next_id[0] += 1
            upload_id = str(next_id[0])
            length = int(self.headers.get("Upload-Length") or 0)
            uploads[upload_id] = {"scenario": scenario, "data": bytearray(data), "length": length, "patches": 0,
                                  "heads": 0, "next": threading.Event()}
        port = ports["alt"] if scenario == "other-origin" else ports["main"]
        headers = {"Location": {
            "relative-location": f"/u/{upload_id}",
            "slow-relative": f"/u/{upload_id}",
            "location-no-host": f"http:///u/{upload_id}",
            "location-userinfo": f"http://u:p@127.0.0.1:{port}/u/{upload_id}",
            "location-ftp": f"ftp://127.0.0.1:{port}/u/{upload_id}",
            "location-https-plain": f"https://127.0.0.1:{port}/u/{upload_id}",
            "location-huge": f"http://127.0.0.1:{port}/u/{upload_id}?" + "a" * 100000,
        }.get(scenario, f"http://127.0.0.1:{port}/u/{upload_id}")}
        if scenario != "creation-201":
            headers["Upload-Complete"] = "?0"
            headers["Upload-Offset"] = str(length - 100 if scenario == "creation-offset" else 0)
        with lock:
            self.remember("creation", 201, headers, b"")
        self.answer(201, headers)

    def remember(self, kind, status, headers, body):
        """Keeps the answer to this request under its Idempotency-Key, if any; called holding the lock."""
        key = self.headers.get("Idempotency-Key")
        if key is not None and idempotency["honoured"]:
            idempotency[kind][key] = (status, headers, body)

    def replayed(self, kind):
        """Answers a request of `kind` whose Idempotency-Key was seen before as that request was answered, reading and
        dropping its body; False for any other."""
        key = self.headers.get("Idempotency-Key")
        with lock:
            stored = idempotency[kind].get(key) if key is not None and idempotency["honoured"] else None
        if stored is None:
            return False
        data, _ = self.read()
        self.entry(len(data))
        status, headers, body = stored
        self.answer(status, headers, body)
        return True

    def do_HEAD(self):
        if self.chaos_scenario():
            return self.chaos_head()
        self.entry(0)
        upload = self.upload()
        if upload is None:
            return self.answer(404)
        upload["next"].set()
        with lock:
            upload["heads"] += 1
            first = upload["heads"] == 1
            offset = len(upload["data"])
            scenario = upload["scenario"]
        if scenario == "head-503" and first:
            return self.answer(503, {"Retry-After": "0"})
        if scenario == "legacy-head":
            return self.answer(204, {"Upload-Offset": str(offset), "Upload-Incomplete": "?0", "Cache-Control": "no-store"})
        if scenario == "complete-short":
            return self.answer(204, {"Upload-Offset": str(max(0, upload["length"] - 1000)), "Upload-Complete": "?1",
                                     "Upload-Length": str(upload["length"]), "Cache-Control": "no-store"})
        hostile_answer = self.draw(scenario, "ok", "ok", "no-field", "202", "malformed", "503")
        if hostile_answer == "503":
            return self.answer(503, {"Retry-After": "0"})
        if hostile_answer in ("no-field", "202", "malformed"):
            headers = {"Upload-Offset": str(offset), "Cache-Control": "no-store"}
            if hostile_answer == "malformed":
                headers["Upload-Complete"] = "yes" if upload.get("processed") else "no"
            return self.answer(202 if hostile_answer == "202" else 204, headers)
        if scenario == "offset-down" and upload["patches"] >= 2:
            offset = upload["length"] // 10 if upload["length"] else offset // 6
        headers = {"Upload-Offset": str(offset), "Upload-Complete": "?1" if upload.get("processed") else "?0",
                   "Cache-Control": "no-store"}
        if self.version() == 10:
            # Required there: the limits, and the length where it is known.
            headers["Upload-Limit"] = "expires=3600"
            if upload["length"]:
                headers["Upload-Length"] = str(upload["length"])
        if scenario == "drop-at-end-no-field":
            del headers["Upload-Complete"]
        self.answer(204, headers)

    def do_DELETE(self):
        self.entry(0)
        upload = self.upload()
        if upload is not None:
            upload["next"].set()
        with lock:
            found = uploads.pop(self.path.split("/")[-1], None)
            if found is not None:
                # An append still being read (slow) stops, as one a newer append took over does: the upload is gone.
                found["writer"] = None
        self.answer(204 if found else 404)

    def do_PATCH(self):
        if self.chaos_scenario():
            return self.chaos_patch()
        upload = self.upload()
        if upload is None:
            self.read()
            self.entry(0)
            return self.answer(404)
        with lock:
            upload["patches"] += 1
            patch = upload["patches"]
            if patch > 1:
                upload["next"].set()
            upload["writer"] = writer = object()
        scenario = upload["scenario"]
        if scenario == "stall" and patch == 1 and self.path.split("/")[-1] == "1":
            data, _ = self.read(limit=1 << 20)
            self.entry(len(data))
            with lock:
                upload["data"] += data
            upload["next"].wait(120)
            return self.drop()
        if scenario == "auth" and self.headers.get("Authorization") != "Basic dTpw":
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(401, {"WWW-Authenticate": 'Basic realm="uploads"'})
        if scenario == "empty-413" and int(self.headers.get("Content-Length") or 0) == 0:
            self.entry(0)
            return self.answer(413)
        if scenario in ("too-large", "too-large-min") and int(self.headers.get("Content-Length") or 0) > 120000:
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(413)
        offset = int(self.headers.get("Upload-Offset") or -1)
        if self.version() == 10 and self.headers.get("Upload-Complete") not in ("?0", "?1"):
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(400)
        if scenario in ("legacy-head", "complete-short") and patch == 1:
            data, _ = self.read()
            self.entry(len(data))
            with lock:
                upload["data"] += data
            return self.answer(503, {"Retry-After": "0"})
        if scenario == "refused-whole":
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(400, {"Upload-Complete": "?1", "Content-Type": "text/plain"}, b"refused: sorry")
        if scenario.startswith("refuse-"):
            return self.refuse(scenario)
        if scenario in ("early-400", "early-200"):
            data, declared = self.read(limit=100000)
            self.entry(len(data))
            self.close_connection = True
            status = 400 if scenario == "early-400" else 200
            self.answer(status, {"Upload-Complete": "?1", "Content-Type": "application/json", "Connection": "close"},
                        b'{"error": "the application refused the form after its first part"}\n' if status == 400
                        else b'{"ok": "claimed before the last byte"}\n')
            self.wfile.flush()
            # A lingering close: what the client still sends is read and dropped, so that the answer is not lost to a
            # reset.
            self.drop_rest(declared - len(data))
            return
        hostile_answer = self.draw(scenario, "ok", "ok", "keep-drop", "process-drop", "503", "200-no-field")
        if hostile_answer is not None and hostile_answer != "ok":
            return self.hostile_append(upload, offset, hostile_answer)
        if scenario == "hostile" and upload.get("processed"):
            # A completed upload is never processed again.
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(400)
        if scenario in ("slow", "slow-relative", "paced"):
            return self.slow_append(upload, offset, writer, paced=scenario == "paced")
        if scenario == "huge-500":
            data, _ = self.read()
            self.entry(len(data))
            return self.huge_answer(500, 2 << 30)
        length = upload["length"]
        # A length not given at creation is the one the completing append reaches.
        left = length - offset if length else int(self.headers.get("Content-Length") or 0)
        completes = self.headers.get("Upload-Complete") == "?1"
        if scenario == "gone-second" and patch == 2:
            data, _ = self.read()
            self.entry(len(data))
            with lock:
                uploads.pop(self.path.split("/")[-1], None)
            return self.answer(404)
        if scenario == "redirect-307" and patch == 1:
            data, _ = self.read()
            self.entry(len(data))
            alias = self.path.split("/")[-1] + "-moved"
            with lock:
                uploads[alias] = upload
            return self.answer(307, {"Location": f"/u/{alias}"})
        keep = None
        if patch == 1 and scenario in ("incomplete-204", "head-503", "patch-503", "conflict-409", "partial-200"):
            keep = left // 2
        elif scenario == "drop-twice" and patch <= 2:
            keep = left // 3
        elif scenario == "max-append-drop" and patch == 2:
            keep = int(self.headers.get("Content-Length") or 0) // 2
        elif scenario == "offset-down" and patch == 1:
            keep = left * 6 // 10
        elif scenario == "offset-down" and patch == 2:
            keep = 0
        elif scenario == "drop-last" and completes and not upload.get("dropped"):
            keep = left // 2
            upload["dropped"] = True
        if self.version() >= 8 and keep is None and int(self.headers.get("Content-Length") or 0) > 65536:
            # The first 64 KiB, then an interim answer that the server has them.
            first, _ = self.read(limit=65536)
            with lock:
                ahead = offset == len(upload["data"])
            if ahead:
                self.interim(offset + len(first))
            rest, declared = self.read(limit=int(self.headers.get("Content-Length")) - len(first))
            data = first + rest
        else:
            data, declared = self.read(limit=keep)
        self.entry(len(data))
        with lock:
            if offset != len(upload["data"]):
                return self.answer(409, {"Upload-Offset": str(len(upload["data"])), "Upload-Complete": "?0"})
            upload["data"] += data
            stored = len(upload["data"])
        if keep is not None and len(data) < declared:
            if scenario == "incomplete-204":
                return self.answer(204, {"Upload-Complete": "?0"})
            if scenario == "patch-503":
                self.close_connection = True
                return self.answer(503, {"Connection": "close"})
            if scenario in ("conflict-409", "partial-200"):
                return self.answer(409 if scenario == "conflict-409" else 200,
                                   {"Upload-Offset": str(stored), "Upload-Complete": "?0"}, b"not the answer\n")
            return self.drop()
        if scenario == "all-bytes-incomplete" and patch == 1:
            return self.drop()
        if scenario in ("drop-at-end", "drop-at-end-no-field") and completes and not upload.get("dropped"):
            upload["dropped"] = True
            return self.drop()
        lie = {"lie-complete-length": {"Upload-Offset": str(length)}, "lie-complete-negative": {"Upload-Offset": "-9999"},
               "lie-complete-none": {}}.get(scenario)
        if lie is not None and patch == 1:
            return self.answer(200 if lie else 204, {"Upload-Complete": "?1", **lie})
        if scenario == "empty-413":
            return self.answer(204, {"Upload-Offset": str(stored), "Upload-Complete": "?0"})
        if stored < length or not completes:
            return self.answer(204, {"Upload-Offset": str(stored), "Upload-Complete": "?0"})
        if scenario == "complete-then-drop":
            with lock:
                form_answer(upload)
                upload["processed"] = True
            return self.drop()
        with lock:
            body = form_answer(upload)
            # Its HEAD says so from now on, as a server that keeps a completed upload does.
            upload["processed"] = True
        status = {"complete-409": 409, "complete-404": 404, "complete-503": 503}.get(scenario, 200)
        headers = {"Upload-Complete": "?1", "Upload-Offset": str(stored), "Content-Type": "application/json"}
        if scenario == "complete-no-field":
            headers = {"Content-Type": "application/json"}
        self.answer(status, headers, body)


    # The chaos scenario.

    def chaos_scenario(self):
        """The chaos scenario of this request (its start URL's, or its upload's), if it is one, in a version spoken."""
        if not self.speaks_draft() and self.command != "POST":
            return None
        scenario = self.scenario()
        return scenario if scenario and scenario.startswith("chaos-") else None

    def chaos_pick(self, *choices):
        """One of `choices` (each a value, or a (value, weight) pair), drawn from this request's scenario."""
        scenario = self.chaos_scenario()
        with lock:
            generator = chaos.setdefault(scenario, random.Random(int(scenario.split("-")[1])))
            values = [c[0] if isinstance(c, tuple) else c for c in choices]
            weights = [c[1] if isinstance(c, tuple) else 1 for c in choices]
            return generator.choices(values, weights)[0]

    def chaos_status(self, refusals_only=False):
        refusals = [400, 401, 403, 404, 405, 409, 410, 413, 422, 500, 503]
        return self.chaos_pick(*(refusals if refusals_only else refusals + [200, 201, 204]))

    def chaos_field(self, honest):
        """Upload-Complete as the draw has it: the honest value, the other, none, one that is no boolean, or the
        field of versions before 5 in its place."""
        kind = self.chaos_pick(("honest", 4), "other", "none", "invalid", "legacy")
        if kind == "honest":
            return {"Upload-Complete": "?1" if honest else "?0"}
        if kind == "other":
            return {"Upload-Complete": "?0" if honest else "?1"}
        if kind == "invalid":
            return {"Upload-Complete": self.chaos_pick("yes", "1", "?2", "")}
        if kind == "legacy":
            return {"Upload-Incomplete": "?0" if honest else "?1"}
        return {}

    def chaos_end(self, status, headers, body=b""):
        """Answers, then keeps the connection or closes it, as drawn. A 204 carries no body: a client reads none, and
        one written would be read as the next answer on a connection kept alive."""
        if status == 204:
            body = b""
        if self.chaos_pick(("keep", 3), "close") == "close":
            self.close_connection = True
            headers = {**headers, "Connection": "close"}
        self.answer(status, headers, body)

    def chaos_applied(self, upload, status):
        """The application processes the upload's form (once) and answers it `status`; returns the answer's body."""
        with lock:
            body = form_answer(upload) if not upload.get("processed") else upload["body"]
            upload["processed"] = True
            upload["body"] = body
            chaos_answers.append({"tag": self.chaos_scenario(), "sha256": json.loads(body)["sha256"], "status": status})
        return body

    def chaos_options(self):
        self.entry(0)
        kind = self.chaos_pick(("draft", 6), "plain", "status")
        if kind == "plain":
            return self.chaos_end(200, {"Allow": "OPTIONS, POST"})
        if kind == "status":
            return self.chaos_end(self.chaos_status(refusals_only=True), {})
        limit = self.chaos_pick(("", 3), "max-append-size=40000")
        lifetime = f"{'expires' if self.version() in (6, 10) else 'max-age'}=3600"
        headers = {"Upload-Limit": f"{limit}, {lifetime}" if limit else lifetime}
        if self.version() >= 8:
            headers["Accept-Patch"] = "application/partial-upload"
        self.chaos_end(200, headers)

    def chaos_post(self):
        data, _ = self.read()
        self.entry(len(data))
        plain = self.headers.get("Upload-Complete") is None or not self.speaks_draft()
        whole = self.headers.get("Upload-Complete") == "?1" and len(data) == int(self.headers.get("Upload-Length") or -1)
        if not plain and whole:
            # The whole upload in its creation: the application takes it and answers with Upload-Complete (as drawn),
            # or the connection drops before or after it took it, or it refuses it; or the server keeps an upload
            # resource of a part of it, and says so as drawn (never ?1: no client could tell that lie from the truth).
            kind = self.chaos_pick(("processed", 3), "dropped", "lost", "refused", ("kept", 2))
            if kind == "dropped":
                return self.drop()
            if kind == "refused":
                status = self.chaos_status(refusals_only=True)
                return self.chaos_end(status, {"Content-Type": "text/plain", "Upload-Complete": "?1"}, b"no")
            if kind == "kept":
                with lock:
                    next_id[0] += 1
                    upload_id = str(next_id[0])
                    kept = bytearray(data[:self.chaos_pick(0, len(data) // 2, len(data))])
                    uploads[upload_id] = {"scenario": self.chaos_scenario(), "data": kept, "length": len(data),
                                          "patches": 0, "heads": 0, "next": threading.Event()}
                headers = {"Location": f"http://127.0.0.1:{ports['main']}/u/{upload_id}"}
                field = self.chaos_field(False)
                if field.get("Upload-Complete") == "?1":
                    field = {}
                return self.chaos_end(self.chaos_pick(200, 201, 204), {**headers, **field})
            status = 0 if kind == "lost" else self.chaos_status()
            body = self.chaos_applied({"data": data}, status)
            if kind == "lost":
                return self.drop()
            return self.chaos_end(status, {"Content-Type": "application/json", **self.chaos_field(True)}, body)
        if plain:
            kind = self.chaos_pick(("processed", 4), "dropped", "refused")
            if kind == "refused":
                return self.chaos_end(self.chaos_status(refusals_only=True), {"Content-Type": "text/plain"}, b"no")
            status = 0 if kind == "dropped" else self.chaos_status()
            body = self.chaos_applied({"data": data}, status)
            if kind == "dropped":
                return self.drop()
            return self.chaos_end(status, {"Content-Type": "application/json"}, body)
        kind = self.chaos_pick(("honest", 5), "status", "drop")
        if kind == "drop":
            return self.drop()
        with lock:
            next_id[0] += 1
            upload_id = str(next_id[0])
            length = int(self.headers.get("Upload-Length") or 0)
            uploads[upload_id] = {"scenario": self.chaos_scenario(), "data": bytearray(), "length": length,
                                  "patches": 0, "heads": 0, "next": threading.Event()}
        headers = {"Location": f"http://127.0.0.1:{ports['main']}/u/{upload_id}"}
        if kind == "honest":
            return self.chaos_end(201, {**headers, "Upload-Complete": "?0", "Upload-Offset": "0"})
        status = self.chaos_status()
        headers.update(self.chaos_field(False))
        self.chaos_end(status, headers, json.dumps({"refused": status}).encode() if status >= 400 else b"")

    def chaos_head(self):
        self.entry(0)
        upload = uploads.get(self.path.split("/")[-1])
        if upload is None:
            return self.answer(404)
        with lock:
            stored, length, processed = len(upload["data"]), upload["length"], upload.get("processed", False)
        kind = self.chaos_pick(("honest", 5), "legacy", "none", "invalid", "short", "503", "404")
        headers = {"Upload-Offset": str(stored), "Cache-Control": "no-store"}
        if kind == "503":
            return self.chaos_end(503, {"Retry-After": "0"})
        if kind == "404":
            return self.chaos_end(404, {})
        if kind == "honest" or kind == "legacy" and self.version() == 6:
            # In version 6 Upload-Incomplete is how a server says complete: said only where it is true.
            name, value = ("Upload-Complete", processed) if kind == "honest" else ("Upload-Incomplete", not processed)
            headers[name] = "?1" if value else "?0"
        elif kind == "legacy":
            headers["Upload-Incomplete"] = self.chaos_pick("?0", "?1")
        elif kind == "invalid":
            headers["Upload-Complete"] = self.chaos_pick("yes", "1", "?2")
        elif kind == "short":
            headers.update({"Upload-Complete": "?1", "Upload-Offset": str(max(0, min(stored, length - 1)))})
        self.chaos_end(204, headers)

    def chaos_patch(self):
        upload = uploads.get(self.path.split("/")[-1])
        if upload is None:
            self.read()
            self.entry(0)
            return self.answer(404)
        declared = int(self.headers.get("Content-Length") or 0)
        offset = int(self.headers.get("Upload-Offset") or -1)
        completes = self.headers.get("Upload-Complete") == "?1"
        keep = self.chaos_pick(("all", 6), "part")
        data, _ = self.read(limit=None if keep == "all" else self.chaos_pick(0, declared // 3, declared // 2))
        self.entry(len(data))
        with lock:
            taken = not upload.get("processed") and offset == len(upload["data"])
            if taken:
                upload["data"] += data
            stored, length = len(upload["data"]), upload["length"]
        if len(data) < declared:
            # What the client still sends is never left on a connection kept alive, where it would read as a request.
            return self.drop()
        if upload.get("processed"):
            return self.answer(400, {}, b"already processed")
        if not taken:
            return self.answer(409, {"Upload-Offset": str(stored), "Upload-Complete": "?0"})
        whole = completes and stored == length
        kind = self.chaos_pick(("honest", 5), "status", "drop")
        if kind == "drop":
            if whole and self.chaos_pick("processed", "not") == "processed":
                self.chaos_applied(upload, 0)
            return self.drop()
        if whole:
            if kind == "honest":
                status = self.chaos_pick(200, 201, 204)
                body = self.chaos_applied(upload, status)
                return self.chaos_end(status, {"Upload-Complete": "?1", "Upload-Offset": str(stored),
                                               "Content-Type": "application/json"}, body)
            # Any status; a success is said complete only once the application has the form.
            status = self.chaos_status()
            if status < 300:
                body = self.chaos_applied(upload, status)
                field = {} if self.version() == 6 else {"Upload-Complete": "?1"}
                return self.chaos_end(status, {**field, "Content-Type": "application/json"}, body)
            headers = self.chaos_field(False)
            if headers.get("Upload-Complete") == "?1" or headers.get("Upload-Incomplete") == "?0":
                # The application's refusal, unprocessed.
                with lock:
                    chaos_answers.append({"tag": self.chaos_scenario(), "sha256": "", "status": status})
            return self.chaos_end(status, headers, b"refused")
        if kind == "honest":
            return self.chaos_end(204, {"Upload-Offset": str(stored), "Upload-Complete": "?0"})
        status = self.chaos_status()
        headers = {"Upload-Offset": str(self.chaos_pick(stored, length, 0))}
        if status >= 300 or self.version() > 6:
            # A success without the field is the application's answer in version 6: never to an append that is not
            # the last, nor before the application has the form.
            headers.update(self.chaos_field(False))
        else:
            headers["Upload-Complete"] = "?0"
        self.chaos_end(status, headers, b"not the answer")

    def hostile_append(self, upload, offset, answer):
        """The hostile scenario's append: `keep-drop` keeps a random part and drops; `process-drop` keeps it all and,
        where that completes the form, has the application process it, then drops; `503` and `200-no-field` keep
        nothing and answer without Upload-Complete (a 503 in version 6, where a 200 without it is the application's
        answer)."""
        declared = int(self.headers.get("Content-Length") or 0)
        with lock:
            keep = hostile["random"].randint(0, declared) if hostile["random"] else declared
        data, _ = self.read(limit=keep if answer == "keep-drop" else None)
        self.entry(len(data))
        if answer in ("503", "200-no-field"):
            # In version 6 a success without Upload-Complete is the application's answer: never one it did not give.
            return self.answer(200 if answer == "200-no-field" and self.version() > 6 else 503)
        with lock:
            if offset == len(upload["data"]):
                upload["data"] += data
            whole = len(upload["data"]) == upload["length"] and self.headers.get("Upload-Complete") == "?1"
            if answer == "process-drop" and whole and not upload.get("processed"):
                form_answer(upload)
                upload["processed"] = True
        return self.drop()

    def slow_append(self, upload, offset, writer, paced=False):
        """The `slow` scenario's append: 64 KiB every 50 ms (or, `paced`, as the shared link lets it), each appended
        as it comes, until the body ends, the client goes, or a newer PATCH takes over."""
        declared = int(self.headers.get("Content-Length") or 0)
        with lock:
            conflict = offset != len(upload["data"])
        if conflict:
            data, _ = self.read()
            self.entry(len(data))
            return self.answer(409, {"Upload-Offset": str(len(upload["data"])), "Upload-Complete": "?0"})
        key = id(upload)
        with lock:
            in_flight["uploads"][key] = in_flight["uploads"].get(key, 0) + 1
            in_flight["most"] = max(in_flight["most"], len(in_flight["uploads"]))
        try:
            return self.slow_read(upload, writer, declared, paced)
        finally:
            with lock:
                in_flight["uploads"][key] -= 1
                if in_flight["uploads"][key] == 0:
                    del in_flight["uploads"][key]

    def slow_read(self, upload, writer, declared, paced):
        read = 0
        while read < declared:
            if paced:
                # A slot of the shared link for the next 64 KiB.
                with lock:
                    start = max(time.monotonic(), link["free"])
                    link["free"] = start + 65536 / 10e6
                time.sleep(max(0.0, start - time.monotonic()))
            try:
                chunk = self.rfile.read(min(65536, declared - read))
            except (ConnectionError, OSError):
                chunk = b""
            if not chunk:
                break
            with lock:
                if upload.get("writer") is not writer:
                    break
                upload["data"] += chunk
            read += len(chunk)
            if not paced:
                time.sleep(0.05)
        self.entry(read)
        if read < declared:
            return self.drop()
        with lock:
            stored = len(upload["data"])
            if stored < upload["length"] or self.headers.get("Upload-Complete") != "?1":
                complete = None
            else:
                complete = form_answer(upload)
                upload["processed"] = True
        if complete is None:
            return self.answer(204, {"Upload-Offset": str(stored), "Upload-Complete": "?0"})
        self.answer(200, {"Upload-Complete": "?1", "Upload-Offset": str(stored), "Content-Type": "application/json"},
                    complete)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


listeners = {}


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()


def listen(up):
    """Opens the first port's listener again (`up`), or closes it: a server that is down refuses connections."""
    with lock:
        current = listeners.get("main")
        if up and current is None:
            listeners["main"] = Server(("127.0.0.1", ports["main"]), Handler)
            serve(listeners["main"])
        elif not up and current is not None:
            current.shutdown()
            current.server_close()
            listeners["main"] = None


def main():
    main_server = Server(("127.0.0.1", 0), Handler)
    alt_server = Server(("127.0.0.1", 0), Handler)
    ports["main"] = main_server.server_address[1]
    ports["alt"] = alt_server.server_address[1]
    listeners["main"] = main_server
    for server in (main_server, alt_server):
        serve(server)
    print(ports["main"], ports["alt"], flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
