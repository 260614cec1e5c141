#!/usr/bin/env python3
"""The package's floor on Apple platforms, checked on Linux: every use in Sources/ of a standard-library or
Concurrency declaration that this toolchain's interfaces mark as newer than the floor the manifest declares
(`platforms:` in Package.swift) on some Apple platform must sit under an `@available` or `#available` that covers
it. No Apple machine builds here, and the compiler on Linux ignores Apple availability, so without this a use of
`Duration` (macOS 13, iOS 16) compiles here and breaks every iOS 13 app that depends on the package.

How: the toolchain's textual interfaces (Swift, _Concurrency, _StringProcessing, Synchronization, Observation,
RegexBuilder, Distributed .swiftinterface under lib/swift/linux) are read for the public declarations whose
`@available` (their own or their extension's or type's) is newer than the floor. A name counts only when every
declaration of it is newer (a type's name; a function's name with its first argument label, `sleep(for:`; an
initializer as `Type(label:`; a property or case after a dot), so an old overload of the same name is never
reported. Then Sources/ is scanned, comments and string literals skipped, for those names, and a use passes when an
enclosing declaration's `@available`, an `if #available` block or condition, or a `guard #available` before it in
its scope covers each platform the declaration needs. Code in an `#if` branch that no Apple platform compiles
(`canImport(FoundationNetworking)`, `os(Linux)`, the `#else` of `canImport(Darwin)`, ...) is not checked.

What it cannot see:
- Names, not types: a newer member reached through type inference under a name that also has an old overload, a
  member whose name the package declares itself (its own `withLock`, say), or a newer type used only through
  inference (`let d = clock.now - start`) is not found; nor are uses inside string interpolations.
- Foundation's own older declaration of a name the standard library also declares newer (`DataProtocol`'s
  `firstRange(of:)`, macOS 10.15, beside `Collection`'s, macOS 13) is not seen, so such a use is reported: write the
  unambiguous Foundation call (`Data.range(of:)`), or put it under `@available`.
- Foundation: on Linux it is swift-corelibs-foundation and swift-foundation, which ship binary modules only here and
  carry the availability of their Linux builds, not Apple's SDK's. Only the few calls FOUNDATION below writes out
  from Apple's SDK are checked (FileHandle's throwing reads and writes, macOS 10.15.4; URLSession's async calls and
  `formatted()`, macOS 12; `URL.appending(path:)` and its kin, macOS 13); any other Foundation API newer than the floor
  (`FormatStyle`, `AttributedString`, ...) is not seen. Dispatch and the C modules (Glibc, SQLite) are not read.
- A declaration's own `@available` is trusted, not checked against what its body needs beyond the names above, and
  `#if` conditions it does not know (`DEBUG`, `compiler(>=6.2)`) count as compiled everywhere.
The GitHub workflow's builds for each Apple platform at the floor are the real check; this one runs where they do not.

Usage: .ci/availability-check.py [--toolchain DIR]   (exit 1 with one line per use that needs an @available)
"""
import argparse
import pathlib
import re
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = ["Swift", "_Concurrency", "_StringProcessing", "Synchronization", "Observation", "RegexBuilder",
           "Distributed"]
APPLE = ["macOS", "iOS", "tvOS", "watchOS", "visionOS"]
DECL_KEYWORDS = {"func", "init", "var", "let", "struct", "class", "enum", "protocol", "actor", "typealias",
                 "extension", "subscript", "case", "deinit", "associatedtype", "macro"}
MODIFIERS = {"public", "package", "internal", "private", "fileprivate", "open", "static", "final", "override",
             "mutating", "nonmutating", "nonisolated", "convenience", "required", "lazy", "weak", "unowned",
             "indirect", "consuming", "borrowing", "dynamic", "optional", "isolated"}
# `#if` conditions true on every Apple platform, and those true on none.
ALL_APPLE = re.compile(r"^canImport\((Darwin|ObjectiveC|UniformTypeIdentifiers|SQLite3)\)$")
NO_APPLE_ATOM = re.compile(r"^(canImport\((FoundationNetworking|Glibc|Musl|Android|Bionic|WinSDK|WASILibc|CSQLite)\)"
                           r"|os\((Linux|Android|Windows|FreeBSD|OpenBSD|WASI|Cygwin|Haiku)\))$")
APPLE_ATOM = re.compile(r"^(canImport\((Darwin|ObjectiveC|UniformTypeIdentifiers|SQLite3)\)"
                        r"|os\((macOS|iOS|tvOS|watchOS|visionOS)\))$")


def version(text):
    """A version as three numbers, so that 13 and 13.0 compare equal."""
    parts = [int(part) for part in text.split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))


def floor():
    """The manifest's `platforms:`, {platform: version}."""
    manifest = (ROOT / "Package.swift").read_text()
    found = {name: version(v.replace("_", ".")) for name, v in re.findall(r"\.(\w+)\(\.v(\d+(?:_\d+)?)\)", manifest)}
    missing = [name for name in APPLE if name not in found]
    if missing:
        sys.exit(f"availability-check: Package.swift names no floor for {missing}")
    return {name: found[name] for name in APPLE}


def spelled(v):
    """`13.0`, `10.15`, `15.4`: as the interfaces write them."""
    parts = list(v)
    while len(parts) > 2 and parts[-1] == 0:
        parts.pop()
    return ".".join(map(str, parts))


def parse_available(arguments):
    """{platform: version} of an `@available(...)`/`#available(...)` argument list; {} when it names no version."""
    result = {}
    parts = [part.strip() for part in arguments.split(",")]
    if len(parts) >= 2 and parts[0] in APPLE and parts[1].startswith("introduced:"):
        return {parts[0]: version(parts[1].split(":", 1)[1].strip())}
    for part in parts:
        match = re.fullmatch(r"(macOS|iOS|tvOS|watchOS|visionOS)\s+(\d+(?:\.\d+)*)", part)
        if match:
            result[match.group(1)] = version(match.group(2))
    return result


def newer(available, base):
    """The platforms on which `available` is newer than `base`, with their versions."""
    return {name: v for name, v in available.items() if v > base.get(name, (0, 0, 0))}


def merged(*availabilities):
    """What nested availabilities give together: the latest version of each platform."""
    result = {}
    for available in availabilities:
        for name, v in available.items():
            result[name] = max(result.get(name, (0, 0, 0)), v)
    return result


def strip_strings(line):
    """The line without string and character literals or a trailing comment, for counting braces."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0] if "//" in line else line


def first_label(rest):
    """The first argument label of a parameter list that starts `rest` (after the name and generics)."""
    rest = rest.lstrip()
    if rest.startswith("<"):
        depth = 0
        for index, character in enumerate(rest):
            depth += {"<": 1, ">": -1}.get(character, 0)
            if depth == 0:
                rest = rest[index + 1 :].lstrip()
                break
    if not rest.startswith("("):
        return None
    inner = rest[1:].lstrip()
    if inner.startswith(")"):
        return ""
    head = inner.split(":", 1)[0].split()
    return head[0].strip("`") if head else None


def interface_declarations(toolchain, base):
    """{key: [newer availability of each declaration]}: keys ("type", name), ("func", name, label),
    ("member", name)."""
    declarations = {}

    def add(key, available):
        declarations.setdefault(key, []).append(newer(available, base))

    for module in MODULES:
        path = toolchain / f"{module}.swiftmodule"
        interfaces = [p for p in path.glob("*.swiftinterface") if ".private." not in p.name] if path.exists() else []
        if not interfaces:
            continue
        # Contexts: (name of the type or extension, its availability, whether it is a body to skip). The members of
        # a type that is itself newer are not recorded: its name is, and a use of them names it (or is inferred,
        # which no name check sees), while recording them would report every old API of the same name.
        stack = []
        pending = {}
        for raw in interfaces[0].read_text().split("\n"):
            line = raw.strip()
            inside_body = any(context[2] for context in stack)
            in_newer_type = any(context[3] for context in stack)
            decl = None
            if not inside_body:
                while line.startswith("@"):
                    match = re.match(r"@(\w+)(\((?:[^()]|\([^()]*\))*\))?\s*", line)
                    if not match:
                        break
                    if match.group(1) == "available" and match.group(2):
                        pending = merged(pending, parse_available(match.group(2)[1:-1]))
                    line = line[match.end():]
                words = re.findall(r"[A-Za-z_]\w*|\S", line)
                while words and (words[0] in MODIFIERS or words[0].startswith("__")):
                    words.pop(0)
                if words and words[0] in DECL_KEYWORDS:
                    keyword = words[0]
                    rest = line[re.search(rf"\b{keyword}\b", line).end():]
                    name_match = re.match(r"\s*`?([A-Za-z_]\w*)`?", rest)
                    outer = merged(*(context[1] for context in stack))
                    available = merged(outer, pending)
                    owner = stack[-1][0] if stack else None
                    if in_newer_type and keyword != "extension":
                        pass
                    elif keyword == "init":
                        label = first_label(rest.lstrip("?!"))
                        if owner and label is not None:
                            add(("func", owner, label), available)
                    elif name_match:
                        name = name_match.group(1)
                        after = rest[name_match.end():]
                        if keyword in {"struct", "class", "enum", "protocol", "actor", "typealias"}:
                            add(("type", name), available)
                        elif keyword == "func":
                            label = first_label(after)
                            if label is not None:
                                add(("func", name, label), available)
                        elif keyword in {"var", "let", "case"}:
                            add(("member", name), available)
                    # An extension's members belong to the type it extends, named without its module.
                    extended = re.match(r"\s*([\w.]+)", rest) if keyword == "extension" else None
                    named = extended.group(1).split(".")[-1] if extended else name_match and name_match.group(1)
                    decl = (keyword, named, available)
                    pending = {}
            counted = strip_strings(line)
            for character in counted:
                if character == "{":
                    if decl and decl[0] in {"struct", "class", "enum", "protocol", "actor", "extension"}:
                        is_newer = decl[0] != "extension" and bool(newer(decl[2], base))
                        stack.append((decl[1], decl[2], False, is_newer))
                    else:
                        stack.append((None, {}, True, False))
                    decl = None
                elif character == "}" and stack:
                    stack.pop()
    return declarations


def newer_names(declarations):
    """The keys every declaration of which is newer than the floor, with the least each needs: {key: {platform:
    version}}."""
    result = {}
    # A function's name alone, for a call with a trailing closure and no parentheses: every overload's.
    overloads = {}
    for key, availabilities in declarations.items():
        if key[0] == "func":
            overloads.setdefault(("func", key[1], "*"), []).extend(availabilities)
    for key, availabilities in [*declarations.items(), *overloads.items()]:
        if all(availabilities):
            least = {}
            for name in APPLE:
                if all(name in available for available in availabilities):
                    least[name] = min(available[name] for available in availabilities)
            if least:
                result[key] = least
    return result


# Foundation's declarations newer than the floor that the package's code is likeliest to reach for, written out from
# Apple's SDK: Foundation here is a binary module whose availability is its Linux build's, not Apple's.
FOUNDATION = {
    **{("func", name, label): {"macOS": (10, 15, 4), "iOS": (13, 4, 0), "tvOS": (13, 4, 0), "watchOS": (6, 2, 0)}
       for name, label in [("write", "contentsOf"), ("read", "upToCount"), ("readToEnd", ""), ("seekToEnd", ""),
                           ("seek", "toOffset"), ("offset", ""), ("truncate", "atOffset"), ("synchronize", "")]},
    **{("func", name, label): {"macOS": (12, 0, 0), "iOS": (15, 0, 0), "tvOS": (15, 0, 0), "watchOS": (8, 0, 0)}
       for name, label in [("data", "for"), ("data", "from"), ("upload", "for"), ("download", "for"),
                           ("download", "from"), ("bytes", "for"), ("bytes", "from"), ("formatted", ""),
                           ("formatted", "_")]},
    **{("func", name, label): {"macOS": (13, 0, 0), "iOS": (16, 0, 0), "tvOS": (16, 0, 0), "watchOS": (9, 0, 0)}
       for name, label in [("appending", "path"), ("appending", "component"), ("appending", "components"),
                           ("appending", "queryItems"), ("URL", "filePath"), ("path", "percentEncoded")]},
}


TOKEN = re.compile(
    r"(?P<newline>\n)|(?P<space>[ \t\r]+)|(?P<comment>//[^\n]*)|(?P<block>/\*)"
    r"|(?P<string>#*\"\"\"|#*\")|(?P<directive>^[ \t]*#(?:if|elseif|else|endif)\b[^\n]*)"
    r"|(?P<attribute>[@#](?:available|unavailable)\s*\((?:[^()]|\([^()]*\))*\))"
    r"|(?P<identifier>`?[A-Za-z_][A-Za-z0-9_]*`?)|(?P<number>[0-9][0-9_.a-fA-FxXoObBpP]*)|(?P<other>.)",
    re.MULTILINE,
)


def tokens(text):
    """(kind, text, line) of the code of a Swift file: comments and string literals left out."""
    position, line = 0, 1
    while position < len(text):
        match = TOKEN.match(text, position)
        kind, value = match.lastgroup, match.group()
        if kind == "block":
            depth, end = 1, match.end()
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
            value = text[position:end]
        elif kind == "string":
            hashes = value.count("#")
            quote = '"""' if value.endswith('"""') else '"'
            closing = quote + "#" * hashes
            end = match.end()
            while end < len(text) and not text.startswith(closing, end):
                end += 2 if text[end] == "\\" and not hashes else 1
            end = min(len(text), end + len(closing))
            value = text[position:end]
        elif kind not in {"space", "comment"}:
            yield kind, value, line
        line += value.count("\n")
        position += len(value)


def branch_skipped(condition):
    """Whether no Apple platform compiles an `#if condition` branch; and whether every one does."""
    condition = condition.strip()
    if ALL_APPLE.match(condition):
        return False, True
    negated = condition.startswith("!")
    atoms = [atom.strip().lstrip("!").strip("() ") for atom in re.split(r"\|\||&&", condition)]
    atoms = [atom if atom.endswith(")") else atom + ")" for atom in atoms]
    if negated and len(atoms) == 1:
        if APPLE_ATOM.match(atoms[0]) and ("Darwin" in atoms[0] or "ObjectiveC" in atoms[0]):
            return True, False
        if NO_APPLE_ATOM.match(atoms[0]):
            return False, True
        return False, False
    if "&&" not in condition and all(NO_APPLE_ATOM.match(atom) for atom in atoms):
        return True, False
    if "||" not in condition and any(NO_APPLE_ATOM.match(atom) for atom in atoms):
        return True, False
    return False, False


def own_names(files):
    """The names the package declares itself, which its uses mean before the toolchain's."""
    types, funcs, members = set(), set(), set()
    for path in files:
        text = path.read_text()
        types.update(re.findall(r"\b(?:struct|class|enum|protocol|actor|typealias)\s+(\w+)", text))
        for name, generics, label in re.findall(r"\bfunc\s+`?(\w+)`?\s*(<[^>]*>)?\s*\(\s*`?(\w*)", text):
            funcs.update({(name, label), (name, "*")})
        members.update(re.findall(r"\b(?:var|let|case)\s+`?(\w+)`?", text))
    return types, funcs, members


def check(path, names, base, own):
    """The uses in `path` that need an availability no scope gives, as lines to print."""
    own_types, own_funcs, own_members = own
    found = []
    listed = list(tokens(path.read_text()))
    # Brace scopes: (availability, availability a guard's else gives its parent when it closes).
    scopes = [({}, None)]
    decl_available, decl_keyword_seen = {}, False
    condition_available, in_guard, guard_available = {}, False, None
    # #if chains: (skipped on Apple, a branch already taken on every Apple platform).
    directives = []
    parens = 0
    for index, (kind, value, line) in enumerate(listed):
        if kind == "directive":
            words = value.strip().split(None, 1)
            keyword, condition = words[0], words[1] if len(words) > 1 else ""
            if keyword == "#if":
                skipped, taken = branch_skipped(condition)
                directives.append((skipped, taken))
            elif keyword == "#elseif" and directives:
                previous_taken = directives[-1][1]
                skipped, taken = branch_skipped(condition)
                directives[-1] = (skipped or previous_taken, taken or previous_taken)
            elif keyword == "#else" and directives:
                # After a branch every Apple platform takes, the rest is skipped; otherwise some Apple platform may
                # come here.
                directives[-1] = (directives[-1][1], True)
            elif keyword == "#endif" and directives:
                directives.pop()
            continue
        skipping = any(skipped for skipped, _ in directives)
        if kind == "attribute":
            available = parse_available(value[value.index("(") + 1 : -1])
            if value.startswith("@"):
                decl_available, decl_keyword_seen = merged(decl_available, available), False
            elif value.startswith("#available"):
                condition_available = merged(condition_available, available)
                if in_guard:
                    guard_available = merged(guard_available or {}, available)
            continue
        if kind == "newline":
            if decl_available and decl_keyword_seen and parens == 0:
                following = next((t for t in listed[index + 1 :] if t[0] != "newline"), None)
                if following and (following[1] in MODIFIERS | DECL_KEYWORDS | {"}", "@"}
                                  or following[0] in {"attribute", "directive"} or following[1].startswith("@")):
                    decl_available, decl_keyword_seen = {}, False
            continue
        if value in {"(", "["}:
            parens += 1
        elif value in {")", "]"}:
            parens = max(0, parens - 1)
        elif value == "{":
            if in_guard and guard_available is not None:
                scopes.append(({}, guard_available))
            else:
                scopes.append((merged(decl_available, condition_available), None))
            decl_available, decl_keyword_seen, condition_available = {}, False, {}
            in_guard, guard_available = False, None
            continue
        elif value == "}":
            if len(scopes) > 1:
                _, gives = scopes.pop()
                if gives:
                    parent, parent_gives = scopes.pop()
                    scopes.append((merged(parent, gives), parent_gives))
            continue
        if kind != "identifier":
            continue
        name = value.strip("`")
        if name == "guard":
            in_guard, guard_available = True, None
        if name in DECL_KEYWORDS and decl_available:
            decl_keyword_seen = True
        if skipping:
            continue
        previous = listed[index - 1][1] if index else ""
        following = listed[index + 1][1] if index + 1 < len(listed) else ""
        needed, shown = None, name
        if ("type", name) in names and name not in own_types:
            needed = names[("type", name)]
        elif following in {"(", "{"} and name not in own_types:
            label = "*"
            if following == "(":
                after = listed[index + 2] if index + 2 < len(listed) else ("", "", 0)
                colon = listed[index + 3][1] if index + 3 < len(listed) else ""
                label = "" if after[1] == ")" else after[1].strip("`") if colon == ":" else "_"
            if (name, label) in own_funcs:
                continue
            # A call with no label may be of the package's own closure property (a label never is); a type's name
            # before `{` begins a body (`-> Never {`), not a call with a trailing closure.
            if (label in {"", "_", "*"} and name in own_members) or (label == "*" and name[:1].isupper()):
                continue
            needed = names.get(("func", name, label))
            shown = name if label == "*" else f"{name}()" if label == "" else f"{name}({label}:)"
        elif previous == "." and ("member", name) in names and name not in own_members:
            needed = names[("member", name)]
        if not needed:
            continue
        given = merged(*(scope[0] for scope in scopes), decl_available, condition_available)
        short = [f"{p} {spelled(v)}" for p, v in needed.items() if given.get(p, base[p]) < v]
        if short:
            found.append(f"{path.relative_to(ROOT)}:{line}: `{shown}` needs {', '.join(short)} (the package's floor"
                         f" is lower) and no @available or #available covers this use")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolchain", type=pathlib.Path, help="lib/swift/linux of the toolchain (default: swift's)")
    options = parser.parse_args()
    toolchain = options.toolchain
    if toolchain is None:
        swift = shutil.which("swift")
        if swift is None:
            sys.exit("availability-check: no swift on the PATH")
        toolchain = pathlib.Path(swift).resolve().parent.parent / "lib/swift/linux"
    base = floor()
    names = {**FOUNDATION, **newer_names(interface_declarations(toolchain, base))}
    if ("type", "Duration") not in names:
        sys.exit(f"availability-check: {toolchain} has no interface that marks Duration as macOS 13: nothing to check"
                 " against")
    files = sorted((ROOT / "Sources").rglob("*.swift"))
    own = own_names(files)
    found = [use for path in files for use in check(path, names, base, own)]
    for use in found:
        print(use)
    floor_text = ", ".join(f"{name} {spelled(v)}" for name, v in base.items())
    print(f"availability-check: {len(files)} files, {len(names)} newer names from the toolchain's interfaces, "
          f"floor {floor_text}: {len(found)} uses uncovered")
    sys.exit(1 if found else 0)


main()
