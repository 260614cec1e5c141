"""Django under gunicorn on 127.0.0.1, for upload tests: answers what `request.POST` and `request.FILES` hold.

Usage: python3 django_server.py
Installs Django and gunicorn from PyPI when they are missing, prints its port on the first line of stdout, and
stops gunicorn and exits when stdin closes. Any path answers
{method, contentLength, transferEncoding, fields: {name: [value]}, files: {name: [{fileName, contentType, bytes,
sha256}]}}. Django reads only bodies with a Content-Length: a chunked one comes out as an empty form, and gunicorn
answers before reading it.
"""
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys

if importlib.util.find_spec("django") is None or importlib.util.find_spec("gunicorn") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "django", "gunicorn"], check=True,
                   stdout=sys.stderr)

import django  # noqa: E402 (installed above when missing)
from django.conf import settings  # noqa: E402
from django.http import JsonResponse  # noqa: E402


def upload(request):
    def digest(upload):
        hash = hashlib.sha256()
        for chunk in upload.chunks():
            hash.update(chunk)
        return hash.hexdigest()

    return JsonResponse({
        "method": request.method,
        "contentLength": request.META.get("CONTENT_LENGTH") or None,
        "transferEncoding": request.META.get("HTTP_TRANSFER_ENCODING"),
        "fields": {name: request.POST.getlist(name) for name in request.POST},
        "files": {
            name: [
                {"fileName": file.name, "contentType": file.content_type, "bytes": file.size, "sha256": digest(file)}
                for file in request.FILES.getlist(name)
            ]
            for name in request.FILES
        },
    })


settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="upload-tests-only",
    MIDDLEWARE=[],
    DATA_UPLOAD_MAX_MEMORY_SIZE=None,
    DATA_UPLOAD_MAX_NUMBER_FIELDS=None,
    DATA_UPLOAD_MAX_NUMBER_FILES=None,
)
django.setup()

from django.urls import re_path  # noqa: E402 (after settings)

urlpatterns = [re_path(r"", upload)]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

if __name__ == "__main__":
    # Foundation's Process starts children with every signal blocked; gunicorn lives on signals (and inherits the
    # mask), so unblock them, or it would never stop.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, range(1, signal.NSIG))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    here = os.path.dirname(os.path.abspath(__file__))
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"fd://{listener.fileno()}", "--workers", "1",
         "--timeout", "120", "--log-level", "warning", "--chdir", here, "django_server:application"],
        pass_fds=[listener.fileno()], stdout=sys.stderr)
    print(listener.getsockname()[1], flush=True)
    sys.stdin.read()
    gunicorn.terminate()
    try:
        gunicorn.wait(timeout=10)
    except subprocess.TimeoutExpired:
        gunicorn.kill()
        gunicorn.wait()
