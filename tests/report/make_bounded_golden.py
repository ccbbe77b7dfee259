#!/usr/bin/env python3
"""Makes a bounded golden report (docs/report-format.md, minor 10) from a text golden report: the
spine and its detail parts, as the writer lays them out (track/report_parts.cpp), so that the CLI's
golden runs read a bounded report by hand-checkable files. Not run by the tests: its output is
committed (golden/bounded_*.mgr and their .part-NNNNNN files).

  make_bounded_golden.py SRC OUT PER_PART DROP LIMIT

SRC: a text report; OUT: the spine's path; PER_PART: detail records (A F T t) per part; DROP: how
many of the first parts to delete (their `f` records go in the spine where the writer would have
written them: when the part after the last kept... here, just before the spine's first record after
the deleted part's end); LIMIT: the `I report_limit` to write."""
import sys

src, out, per_part, drop, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lines = open(src).read().splitlines()
assert lines[0] == "MEMGUARD-REPORT 1", lines[0]
spine, parts = [lines[0]], []
live = {}  # addr -> (letter, line) of the live A and T blocks, in order of allocation
position = 0
told = 0  # the position the spine was last told
part, part_first = None, 0
closed = []  # (number, first, end, until)
last_t = "0"


def start_part(n):
    global part, part_first
    part = [lines[0], "l %d %d" % (position, len(live))] + [x for x in live.values()]
    part_first = position
    parts.append((n, part))


for line in lines[1:]:
    f = line.split(" ")
    if f[0] == "I" and f[1] == "format_minor":
        line = "I format_minor %d" % max(10, int(f[2]))  # bounded reports are minor 10; a later stays
    if f[0] in ("A", "F", "T", "t"):
        if part is None:
            start_part(1)
        part.append(line)
        position += 1
        last_t = f[1]
        key = ("A" if f[0] in "AF" else "T", f[3])
        if f[0] in ("A", "T"):
            live[key] = line
        else:
            live.pop(key, None)
        if position - part_first >= per_part:
            closed.append((len(parts), part_first, position, last_t))
            start_part(len(parts) + 1)
        continue
    if position != told:
        spine.append("l %d 0" % position)
        told = position
    while drop > 0 and closed and closed[0][0] <= drop:
        n, first, end, until = closed.pop(0)
        spine.append("f %s %d %d %d %s 0" % (until, n, first, end, until))
    spine.append(line)
    if line.startswith("I format_minor"):
        spine.append("I report_limit " + limit)
with open(out, "w") as o:
    o.write("\n".join(spine) + "\n")
for n, p in parts:
    if n <= drop:
        continue
    with open("%s.part-%06d" % (out, n), "w") as o:
        o.write("\n".join(p) + "\n")
