#!/usr/bin/env python3
"""Text that a traced program (or a report's author) chose never reaches the reader raw (CTest
report.report_text; issue 17 item 8).

    check_report_text.py CLI GOLDEN_DIR

Copies of golden reports get names, paths, symbols and other string fields holding control
characters (ESC sequences that retitle and clear a terminal, BEL, CR, LF, TAB, DEL, a C1 CSI),
bytes that are not UTF-8 and markup characters; a benign copy gets plain names in the same places.
Then every command runs on both:
- text output (stdout and stderr): valid UTF-8 without any control character but the line ends,
  the same number of lines as for the benign copy (nothing forged a line), and the names shown
  with visible escapes;
- --json and the Perfetto export: valid UTF-8, no raw C1 character, parsed by json.loads, and the
  names read back as the program wrote them (invalid bytes as U+FFFD);
- plot (SVG, and the SVG inside the HTML): parsed as XML, the names inside;
- the memory_viz export: loaded by pickle, the Python frame names as UTF-8 with U+FFFD.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# Percent-encoded (the report's string fields), then what it decodes to.
HOSTILE = ("%1B]0;pwned%07%1B[2J%0Dforged%20line%0A%09tab%C2%9Bc1%7Fdel%FF%FEbad%E2%80%A6"
           "%3Cb%3E%26%22%27end")
HOSTILE_BYTES = (b"\x1b]0;pwned\x07\x1b[2J\rforged line\n\ttab\xc2\x9bc1\x7fdel\xff\xfebad\xe2\x80\xa6"
                 b"<b>&\"'end")
# How text output shows it (text::printable), and what JSON, XML and pickle read back.
SHOWN = ("\\x1b]0;pwned\\x07\\x1b[2J\\x0dforged line\\x0a\\x09tab\\u009bc1\\x7fdel\\xff\\xfebad\u2026"
         "<b>&\"'end")
DECODED = HOSTILE_BYTES.decode("utf-8", "replace")
# XML 1.0 has no way to carry the other C0 controls: U+FFFD stands for them.
IN_XML = "".join("\ufffd" if ord(c) < 0x20 and c not in "\t\n\r" else c for c in DECODED)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def field_swapper(name):
    """A function that puts `name` (+ a number, to keep names distinct) into a report line's string fields."""
    counter = [0]

    def swap(line):
        f = line.split(" ")
        counter[0] += 1
        n = name + str(counter[0])
        kind = f[0]
        if kind == "B" and len(f) > 5:  # phase name
            f[5] = n
        elif kind == "J" and len(f) > 4:  # mark name
            f[4] = n
        elif kind == "p" and len(f) > 4:  # Python frame: function and file
            f[3], f[4] = n, n + ".py"
        elif kind == "M" and len(f) > 6:  # module path
            f[6] = "/opt/" + n + ".so"
        elif kind == "I" and len(f) > 2 and f[1] in ("exe", "cmdline", "host"):
            f[2] = n
        elif kind == "X" and len(f) > 3:  # compile id
            f[3] = n
        elif kind == "Y" and len(f) > 9 and f[9] != "-":  # the compiles a collection names
            f[9] = n
        elif kind == "W" and len(f) > 4 and f[3] == "unsafe_call":  # the API named
            f[4] = n
        elif kind == "W" and len(f) > 4 and f[3] not in ("free_live_graph", "warmup_retention"):
            f[4] = n  # an unknown hazard: its text reaches a warning
        return " ".join(f)

    return swap


def variant(src, dst, name):
    swap = field_swapper(name)
    lines = open(src, encoding="latin-1").read().split("\n")
    out = [lines[0]] + [swap(l) if l else l for l in lines[1:]]
    # A record type the reader does not know: its text reaches a warning too.
    out.insert(2, "~ " + name + " future")
    with open(dst, "w", encoding="latin-1") as f:
        f.write("\n".join(out))


def run(cli, args, cwd):
    p = subprocess.run([cli, *args], capture_output=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def check_text(what, hostile, benign, expect_shown):
    for stream, h, b in (("stdout", hostile[1], benign[1]), ("stderr", hostile[2], benign[2])):
        try:
            s = h.decode("utf-8")
        except UnicodeDecodeError as e:
            check(False, f"{what} {stream}: not UTF-8: {e}")
            continue
        bad = sorted({hex(ord(c)) for c in s if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f})
        check(not bad, f"{what} {stream}: control characters {bad} reached the output")
        lines, plain_lines = h.count(b"\n"), b.count(b"\n")
        check(lines == plain_lines,
              f"{what} {stream}: {lines} lines, {plain_lines} with plain names (a forged line?)")
    if expect_shown:
        check(SHOWN in hostile[1].decode("utf-8", "replace"),
              f"{what}: the name is not shown escaped: {hostile[1][:400]!r}")


def load_json(what, data):
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError as e:
        check(False, f"{what}: JSON is not UTF-8: {e}")
        return None
    check(not [c for c in s if 0x80 <= ord(c) <= 0x9f], f"{what}: a raw C1 character in the JSON")
    try:
        return json.loads(s)
    except ValueError as e:
        check(False, f"{what}: not JSON: {e}")
        return None


def strings(v):
    """Every string inside a JSON or pickled value."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from strings(k)
            yield from strings(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from strings(x)


def has_name(v):
    return any(DECODED in s for s in strings(v))


def main(cli, golden):
    tmp = tempfile.mkdtemp(prefix="memguard-text-")
    try:
        reports = ["train.mgr", "train_fix.mgr", "graphs.mgr", "gc.mgr", "alloc.mgr", "alloc_b.mgr"]
        for kind, name in (("hostile", HOSTILE), ("benign", "plain")):
            os.mkdir(os.path.join(tmp, kind))
            for r in reports:
                variant(os.path.join(golden, r), os.path.join(tmp, kind, r), name)
        # (command, whether its text shows one of the names)
        commands = [
            (["summary", "train.mgr"], True), (["summary", "graphs.mgr"], True), (["summary", "alloc.mgr"], False),
            (["top", "train.mgr"], True), (["top", "graphs.mgr", "--pool"], True), (["top", "alloc.mgr"], True),
            (["graphs", "graphs.mgr"], False), (["hazards", "graphs.mgr"], True),
            (["cycles", "gc.mgr", "--all"], True), (["cycles", "alloc.mgr"], True), (["phases", "train.mgr"], True),
            (["phases", "train.mgr", "--marks"], True), (["phases", "alloc_b.mgr"], True),
            (["diff", "train.mgr", "train_fix.mgr"], True), (["diff", "alloc.mgr", "alloc_b.mgr"], True),
            (["merge", "train.mgr", "train_fix.mgr", "alloc.mgr"], True),
            # The gates fail (exit 1) here on purpose: their FAIL lines name the sites.
            (["check", "train.mgr", "--max-peak", "1GiB", "--max-live-at-exit", "1MiB"], True, 1),
            (["check", "alloc.mgr", "--max-tensor-peak", "1MiB", "--max-tensor-live-at-exit", "0"], True, 1),
            (["diff", "train.mgr", "train_fix.mgr", "--fail-if", "peak>1", "--fail-if", "oom>+0"], True, 1),
        ]
        for args, shown, *expected in commands:
            expected_rc = expected[0] if expected else 0
            what = "memguard " + " ".join(args)
            h = run(cli, args, os.path.join(tmp, "hostile"))
            b = run(cli, args, os.path.join(tmp, "benign"))
            check(h[0] == expected_rc and b[0] == expected_rc,
                  f"{what}: exit {h[0]} (plain names: {b[0]}), expected {expected_rc}; stderr {h[2][:300]!r}")
            check_text(what, h, b, shown)
            # The same through --json: the names exactly, as valid JSON.
            rc, out, err = run(cli, args[:1] + ["--json"] + args[1:], os.path.join(tmp, "hostile"))
            check(rc == expected_rc, f"{what} --json: exit {rc}")
            doc = load_json(what + " --json", out)
            if doc is not None and shown:
                check(has_name(doc), f"{what} --json: the name does not read back")

        # An error quoting a malformed record's field, and report files whose names hold control
        # characters (merge --template finds files by their names, which whoever can write to the
        # directory chooses): shown in tables and in warnings.
        raw = {"hostile": b"\x1b]0;pwned\x07\x1b[2J\rX\xc2\x9b\xff", "benign": b"plain"}
        raw_shown = "\\x1b]0;pwned\\x07\\x1b[2J\\x0dX\\u009b\\xff"
        incomplete = {}
        for kind in ("hostile", "benign"):
            d = os.path.join(tmp, kind)
            with open(os.path.join(d, "bad.mgr"), "wb") as f:
                f.write(b"MEMGUARD-REPORT 1\nI format_minor 5\nt 1 1 a000 " + raw[kind] + b"\n")
            shutil.copy(os.path.join(d, "train.mgr"), os.path.join(d, os.fsdecode(b"run.0." + raw[kind] + b"\n.mgr")))
            incomplete[kind] = os.fsdecode(b"run.1." + raw[kind] + b".mgr")  # warned of: no end record
            shutil.copy(os.path.join(golden, "incomplete.mgr"), os.path.join(d, incomplete[kind]))
        # (The reader itself quotes a malformed field with '?' for such bytes: not shown escaped.)
        for args, rc, shown in ((lambda k: ["summary", "bad.mgr"], 2, False),
                                (lambda k: ["merge", "--template", "run.%r.%p.mgr"], 0, True),
                                (lambda k: ["summary", incomplete[k]], 0, True)):
            what = "memguard " + " ".join(args("benign"))
            h = run(cli, args("hostile"), os.path.join(tmp, "hostile"))
            b = run(cli, args("benign"), os.path.join(tmp, "benign"))
            check(h[0] == rc and b[0] == rc, f"{what}: exit {h[0]} (plain names: {b[0]}), expected {rc}")
            check_text(what, h, b, False)
            check(not shown or raw_shown in (h[1] + h[2]).decode("utf-8", "replace"),
                  f"{what}: the name is not shown escaped: {h[1][:300] + h[2][:300]!r}")

        hostile = os.path.join(tmp, "hostile")
        for out_name in ("train.svg", "train.html"):
            rc, _, err = run(cli, ["plot", "train.mgr", "-o", out_name], hostile)
            if check(rc == 0, f"plot -o {out_name}: exit {rc}: {err!r}"):
                data = open(os.path.join(hostile, out_name), "rb").read()
                if out_name.endswith(".html"):
                    data = data[data.find(b"<svg"):data.find(b"</svg>") + len(b"</svg>")]
                try:
                    root = ET.fromstring(data)
                    check(any(IN_XML in (e.text or "") for e in root.iter()),
                          f"plot {out_name}: the phase name is not in the picture")
                except ET.ParseError as e:
                    check(False, f"plot {out_name}: not well-formed XML: {e}")

        rc, _, err = run(cli, ["export", "--perfetto", "train.mgr", "-o", "train.json"], hostile)
        if check(rc == 0, f"export --perfetto: exit {rc}: {err!r}"):
            doc = load_json("export --perfetto", open(os.path.join(hostile, "train.json"), "rb").read())
            if doc is not None:
                check(has_name(doc), "export --perfetto: the phase name does not read back")

        rc, _, err = run(cli, ["export", "--memory-viz", "train.mgr", "-o", "train.pickle"], hostile)
        if check(rc == 0, f"export --memory-viz: exit {rc}: {err!r}"):
            try:
                snap = pickle.loads(open(os.path.join(hostile, "train.pickle"), "rb").read())
                check(has_name(snap), "export --memory-viz: the Python frame names do not read back")
            except Exception as e:  # noqa: BLE001 (any failure to load is the finding)
                check(False, f"export --memory-viz: pickle.loads failed: {e!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
