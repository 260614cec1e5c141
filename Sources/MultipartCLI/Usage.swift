/// `multipart --help`.
let usage = """
    usage: multipart [options] [URL]
    Builds a multipart/form-data body, as curl -F does, and uploads it to URL streaming from disk,
    or writes it to a file with -o when there is no URL.

    Fields (curl's -F grammar; quote a value with "..." to hold ; or start with @ or <):
      -F, --form 'name=value'                     a text field
      -F 'name=value;type=text/csv'               a text field with a Content-Type
      -F 'photo=@cat.jpg'                          a file, named cat.jpg, typed from its extension
      -F 'doc=@a.pdf;type=application/pdf;filename=b.pdf'
                                                   a file with its type and name given
      -F 'note=<notes.txt'                         a text field read from a file

    Request:
      -H, --header 'Name: value'                   a request header, e.g. -H 'Authorization: Bearer T'
      -X, --request METHOD                         the method (default POST; not GET or HEAD, which carry no
                                                   body in URLSession), e.g. -X PUT
      --boundary B                                 the boundary (default: 128 random bits), e.g. --boundary XyZ
      --strategy stream|file|automatic             stream the body (the default), or write it to a temporary
                                                   file first and send that; both send the exact
                                                   Content-Length, e.g. --strategy file
      --limit-rate RATE                            bytes per second, K, M or G suffixes, e.g. --limit-rate 500K

    Output:
      -o, --output FILE                            the response body to FILE (- for standard output, the
                                                   default); without a URL, the encoded body, e.g. -o body.bin.
                                                   A device is written into; a file is replaced only once
                                                   complete; a directory or an input file is refused
      --output-body FILE                           write the encoded body to FILE (- for standard output)
                                                   instead of uploading, e.g. --output-body form.multipart
      -s, --silent                                 no progress and no summary
      -v, --verbose                                print the request and response headers on stderr
      -h, --help                                   this text

    Progress goes to stderr: a bar when stderr is a terminal, else a summary line.
    Exit status: 0 success, 2 usage error, 3 a local file problem, 4 a network or HTTP failure (4xx, 5xx).

    Examples:
      multipart -F title=Holiday -F 'video=@beach.mov' https://example.com/upload
      multipart -F 'a=1' -F 'f=@notes.txt' -o form.multipart
    """
