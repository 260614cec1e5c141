/// `multipart --help`.
let usage = """
    usage: multipart [options] [URL]
    Builds a multipart/form-data body, as curl -F does, and uploads it to URL streaming from disk,
    or writes it to a file with -o when there is no URL. Options read as curl's: short flags combine
    (-sSL), a value may follow its flag (-Fa=1, -so out) or a long option's = (--form=a=1), and --
    ends the options.

    Fields (curl's -F grammar; quote a value with "..." to hold ; or start with @ or <):
      -F, --form 'name=value'                     a text field
      -F 'name=value;type=text/csv'               a text field with a Content-Type
      -F 'photo=@cat.jpg'                          a file, named cat.jpg, typed from its extension as curl
                                                   types it (gif jpg jpeg png svg txt htm html pdf xml, else
                                                   application/octet-stream; none for @-)
      -F 'doc=@a.pdf;type=application/pdf;filename=b.pdf'
                                                   a file with its type and name given
      -F 'note=<notes.txt'                         a text field read from a file
      -F 'f=@a.txt;headers="X-Tag: v"'             header lines of the part's own, as many as given;
      -F 'f=@a.txt;headers=@headers.txt'           headers=@FILE takes FILE's lines (# starts a comment)
      -F 'log=@-', -F 'note=<-'                    standard input, once per command. @- is copied to a
                                                   temporary file first (removed at the end), so that the
                                                   Content-Length is exact; with -C - it is streamed as it
                                                   is read where the server speaks the resumable-upload
                                                   draft (-v says which); <- is read into memory
      --form-string 'name=value'                   a text field taken literally: no @, <, quotes or ;type=

    Request:
      -H, --header 'Name: value'                   a request header, e.g. -H 'Authorization: Bearer T';
                                                   'Name:' leaves the header out (also one URLSession adds,
                                                   e.g. -H 'Accept:'), 'Name;' sends it empty
      -u, --user USER:PASSWORD                     Basic authentication, e.g. -u ada:secret
      -A, --user-agent AGENT                       the User-Agent header, e.g. -A 'backup/2.1'
      -X, --request METHOD                         the method (default POST; not GET or HEAD, which carry no
                                                   body in URLSession), e.g. -X PUT
      -L, --location                               follow redirects (not without it, as curl); a 307 or 308
                                                   sends the whole form again, a 301-303 turns into a GET;
                                                   -u and -H Authorization, Cookie and Proxy-Authorization
                                                   go to the first host only, as curl
      --location-trusted                           -L, and send those credentials to every host redirected to,
                                                   and with -C - to the server's upload resource elsewhere
      --max-time S                                 end an attempt after S seconds, exit 4, e.g. --max-time 30
      --connect-timeout S                          end an attempt that has no connection after S seconds
                                                   (no body byte taken), exit 4, e.g. --connect-timeout 5
      --retry N                                    retry up to N times on a connection failure, a timeout, or
                                                   HTTP 408, 429, 500, 502, 503, 504, sending the form again
                                                   from its first byte, e.g. --retry 3
      -C -, --continue-at -                        a resumable upload: after a dropped or stalled connection,
                                                   ask the server how much it has and send only the rest
                                                   (--retry N failures in a row, 30 unless given: progress
                                                   gives them back); a server that does not
                                                   speak the resumable-upload draft gets the whole form once,
                                                   e.g. -C - --retry 8. Its state is saved (no credentials):
                                                   after Ctrl-C, a kill, a reboot or retries spent, run the
                                                   same command again and it resumes where the server stands
      --single-request-limit SIZE                  with -C - or --queue DIR --run: a form of at most SIZE
                                                   bytes (K, M, G) goes whole in one request, asking the
                                                   server nothing first, and again whole after a drop
                                                   (default 1M; 0: every form asks first)
      --state-dir DIR                              where -C - keeps its state (default
                                                   $XDG_STATE_HOME/multipart, else ~/.local/state/multipart)
      --abandon                                    with -C -: give up the saved upload of this form to URL,
                                                   deleting it on the server and here, instead of sending it
      --list-saved                                 list the saved uploads (URL, the offset the server last
                                                   acknowledged, age, when each is removed), once those past
                                                   their lifetime (the server's max-age, else 7 days) are
                                                   removed; with --state-dir DIR
      --queue DIR                                  add the form to the upload queue kept in DIR (no credentials:
                                                   give them to --run), printing its ID; with --run, send the
                                                   queue: resumable uploads, 3 at a time in the order added,
                                                   each resumed after a kill, e.g. --queue ~/q -F f=@a.log URL
      --run                                        with --queue DIR: send its uploads, -H and -u going with each
                                                   request; exit 0 when all completed, 4 when one failed
      --parallel N                                 with --queue DIR --run: uploads at once (default 3)
      --key K                                      with --queue DIR: add the form only if no upload of the
                                                   queue has key K (it prints that one's ID), e.g. --key
                                                   "$(realpath a.log)", nor had it and completed or was removed
      --again                                      with --queue DIR --key K: add it though K's upload completed
                                                   or was removed
      --list                                       with --queue DIR: a line an upload: ID, state (a failure's
                                                   reason), bytes, URL, key, files
      --retry ID                                   with --queue DIR: send the failed upload ID again at the next
                                                   --run, its files as they are now
      --remove ID                                  with --queue DIR: take the upload out of the queue (one that
                                                   has not completed is deleted on the server at once)
      --remove-completed                           with --queue DIR: take every completed upload out
      --pause ID, --resume ID                      with --queue DIR: keep the upload ID out of every --run (one
                                                   under way stops, its saved state kept) until it is resumed
      --prioritize ID                              with --queue DIR: make the upload ID the next to start, in a
                                                   --run under way (in any process) and the next
      --speed-limit BYTES, -Y                      with --speed-time: an attempt slower than BYTES a second
      --speed-time S, -y                           for S seconds has stalled (defaults 1 and 30 when only one
                                                   is given): exit 4, or with -C - a resume, e.g. -y 10
      --retry-delay S                              seconds between retries (default: the server's Retry-After,
                                                   else 1 s doubling; with -C - up to 15 s), e.g. --retry-delay 2
      --retry-max-time S                           no retry starts S seconds after the first attempt; with -C -,
                                                   the longest it waits out failures without progress (an
                                                   outage), then exit 4 with the upload saved, e.g.
                                                   -C - --retry-max-time 600
      --boundary B                                 the boundary (default: 128 random bits), e.g. --boundary XyZ
      --strategy stream|file|automatic             automatic (the default) streams the body, or sends a small
                                                   form of fields as bytes; stream always streams; file
                                                   writes it to a temporary file first and sends that; each
                                                   sends the exact Content-Length; not with -C -, which
                                                   streams, e.g. --strategy file
      --limit-rate RATE                            bytes per second, K, M or G suffixes (1024s), not with
                                                   --strategy file, e.g. --limit-rate 500K
      -k, --insecure                               refused: URLSession on Linux cannot skip certificate checks

    Output:
      -o, --output FILE                            the response body to FILE (- for standard output, the
                                                   default), whatever the status (an error page too); without
                                                   a URL, the encoded body, e.g. -o body.bin.
                                                   A device is written into; a file is replaced only once
                                                   complete; a directory or an input file is refused
      --output-body FILE                           write the encoded body to FILE (- for standard output)
                                                   instead of uploading, e.g. --output-body form.multipart
      -i, --include                                the status line and response headers before the body
      -f, --fail, --fail-with-body                 accepted for curl's scripts: HTTP 400 and above always
                                                   exit 4, the response body still written to -o
      -w, --write-out FORMAT                       print FORMAT on standard output at the end, with
                                                   %{http_code}, %{time_total}, %{size_upload},
                                                   %{speed_upload}, %{url_effective}, %{size_download},
                                                   %{content_type}, %{exitcode}, and \\n, \\t, %%,
                                                   e.g. -w '%{http_code} %{time_total}\\n'; -w @FILE reads
                                                   FORMAT from FILE (@- from standard input)
      -s, --silent                                 no progress, no summary and no error messages
      -S, --show-error                             error messages even with -s, e.g. -sS
      -v, --verbose                                print the request line and headers as they go out (those
                                                   URLSession adds too), and the response's, on stderr; with
                                                   -C -, each request of the protocol and the draft's fields
                                                   of its answer
      -h, --help                                   this text
      -V, --version                                the version, and what it runs on

    Progress goes to stderr: a bar when stderr is a terminal (fitted to its width, redrawn in place:
    the ETA, the rate and the bar give way in a narrow one), else a summary line.
    With -C -, a line says each drop and where the upload goes on from, and a server that does not
    speak the draft; %{size_upload} counts the bytes the run sent, resent ones again.
    Exit status: 0 success, 2 usage error, 3 a local file problem (named before any byte is sent) or
    a -C - state that cannot be kept, 4 a network or HTTP failure, 130 (Ctrl-C) or 143 (SIGTERM) for
    an interrupted -C - upload; a -C - upload interrupted or kept after a failure prints the command
    that resumes it. Unlike curl, HTTP 400 and above exit 4 with the status and the first lines of
    the response on stderr (curl needs --fail-with-body, and exits 22), a 3xx without -L exits 0, a
    URL without -F is a usage error (curl would send a GET), and no Expect: 100-continue goes out
    (curl sends one for bodies over 1 MiB).

    Examples:
      multipart -F title=Holiday -F 'video=@beach.mov' https://example.com/upload
      tar c photos | multipart -sS --retry 3 -F 'backup=@-;filename=photos.tar' https://example.com/backup
      tar c photos | multipart -sS -C - -F 'backup=@-;filename=photos.tar' https://example.com/backup
      multipart -F 'a=1' -F 'f=@notes.txt' -o form.multipart
    """
