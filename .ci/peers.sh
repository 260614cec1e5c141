#!/usr/bin/env bash
# The peers and system packages the tests need, installed where missing: the one list, which .ci/run and the GitHub
# workflow both run. Node (its Response.formData() parses what the library produces), Werkzeug, Django under
# gunicorn (the server that loses chunked bodies), curl, the system's SQLite (the MultipartQueue product's store, a
# system-library target found with pkg-config), and GNU time (queue-cost reads the command's peak memory with it).
set -euo pipefail

apt_install() {
    apt-get update -qq && apt-get install -y -qq "$@"
}

# pip as Debian's Python takes it: into the system's site-packages, which PEP 668 guards.
pip_install() {
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
    python3 -m pip install --quiet "$@" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$@"
}

command -v node >/dev/null || apt_install nodejs
node --version
command -v curl >/dev/null || apt_install curl
python3 -c 'import werkzeug' 2>/dev/null || pip_install werkzeug
python3 -c 'import werkzeug.sansio.multipart, importlib.metadata as m; print("werkzeug", m.version("werkzeug"))'
python3 -c 'import django, gunicorn' 2>/dev/null || pip_install django gunicorn
python3 -c 'import importlib.metadata as m; print("django", m.version("django"), "gunicorn", m.version("gunicorn"))'
pkg-config --exists sqlite3 2>/dev/null || apt_install libsqlite3-dev pkg-config
echo "sqlite3 $(pkg-config --modversion sqlite3)"
[ -x /usr/bin/time ] || apt_install time
