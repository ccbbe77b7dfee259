#!/usr/bin/env python3
"""Checks the files `memguard export` and `memguard plot` write (CTest report.exports and
report.exports_torch).

    check_exports.py CLI GOLDEN_DIR            the schema and format checks (Python's standard library)
    check_exports.py --torch CLI GOLDEN_DIR    the memory_viz export through torch.cuda._memory_viz
                                               (exit 77, a skip, when torch cannot be imported)

memory_viz: the pickle must use protocol <= 4 and only the opcodes the viewer's own unpickler
knows; the snapshot must have the schema of torch.cuda.memory._snapshot(); and `segments` must be
consistent with the traces: replaying the traces forward from nothing must end in exactly the
segments, and replaying them backward from the segments (what the viewer's "Allocator State
History" does, which throws on a free of a block that is not live) must never go wrong.
Perfetto: the JSON must follow the trace-event format. plot: the SVG must parse as XML and have
the series, the phase spans, the markers and the peak annotation.
"""
import json
import os
import pickle
import pickletools
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# The opcodes of MemoryViz.js's unpickler (protocols 2 to 4).
VIEWER_OPCODES = {
    "PROTO", "FRAME", "MARK", "STOP", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST", "TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "SETITEM", "SETITEMS", "APPEND", "APPENDS", "BINGET", "LONG_BINGET",
    "BINPUT", "LONG_BINPUT", "MEMOIZE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
    "SHORT_BINUNICODE", "BINUNICODE", "NONE", "NEWTRUE", "NEWFALSE",
}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "snapshot", "oom"}
SVG = "{http://www.w3.org/2000/svg}"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def run(cli, *args, rc=0):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    check(p.returncode == rc, f"memguard {' '.join(args)}: exit {p.returncode}, expected {rc}; stderr: {p.stderr}")
    return p


def check_frames(frames, where):
    if not check(isinstance(frames, list), f"{where}: frames is not a list"):
        return
    for f in frames:
        check(isinstance(f, dict) and set(f) >= {"filename", "line", "name"}, f"{where}: bad frame {f!r}")
        check(isinstance(f.get("filename"), str) and isinstance(f.get("line"), int) and isinstance(f.get("name"), str),
              f"{where}: frame field types {f!r}")


def check_memory_viz(path, name, expect_segments=None):
    data = open(path, "rb").read()
    check(data[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04"), f"{name}: protocol header {data[:2]!r} (need 2..4)")
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    check(ops <= VIEWER_OPCODES, f"{name}: opcodes the viewer cannot read: {sorted(ops - VIEWER_OPCODES)}")
    snap = pickle.loads(data)
    check(set(snap) >= {"segments", "device_traces"}, f"{name}: top-level keys {sorted(snap)}")
    segs, traces = snap["segments"], snap["device_traces"]
    seg_keys = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
    for s in segs:
        check(set(s) >= seg_keys, f"{name}: segment keys {sorted(s)}")
        check(isinstance(s["segment_pool_id"], tuple) and len(s["segment_pool_id"]) == 2, f"{name}: segment_pool_id")
        check(s["segment_type"] in ("small", "large"), f"{name}: segment_type {s['segment_type']}")
        check_frames(s["frames"], f"{name} segment")
        # The viewer recomputes block addresses from the segment's address and the block sizes.
        check(sum(b["size"] for b in s["blocks"]) == s["total_size"], f"{name}: blocks do not fill the segment")
        offset = s["address"]
        for b in s["blocks"]:
            check(set(b) >= {"address", "size", "requested_size", "state", "frames"}, f"{name}: block keys {sorted(b)}")
            check(b["state"] in ("active_allocated", "active_pending_free", "inactive"), f"{name}: state {b['state']}")
            check(b["address"] == offset, f"{name}: block address {b['address']} != {offset}")
            offset += b["size"]
            check_frames(b["frames"], f"{name} block")
    check(isinstance(traces, list), f"{name}: device_traces is not a list")
    def within(segments, a):
        """The segment (address) whose range holds address a, or None."""
        return next((s for s, size in segments.items() if s <= a < s + size), None)

    for dev, trace in enumerate(traces):
        live_segments, live_blocks = {}, {}
        last_us = None
        for i, e in enumerate(trace):
            where = f"{name} device {dev} entry {i}"
            check(e.get("action") in ACTIONS, f"{where}: action {e.get('action')}")
            check(all(isinstance(e.get(k), int) for k in ("addr", "size", "stream", "time_us")), f"{where}: fields {e}")
            check_frames(e.get("frames"), where)
            check(last_us is None or e["time_us"] >= last_us, f"{where}: time goes back")
            last_us = e["time_us"]
            a = e["addr"]
            if e["action"] == "segment_alloc":
                check(a not in live_segments, f"{where}: segment {a} allocated twice")
                live_segments[a] = e["size"]
            elif e["action"] == "alloc":
                check(within(live_segments, a) is not None and a not in live_blocks, f"{where}: alloc outside a segment")
                check(within(live_segments, a) == within(live_segments, a + e["size"] - 1),
                      f"{where}: alloc beyond its segment's end")
                live_blocks[a] = "active"
            elif e["action"] == "free_requested":
                check(live_blocks.get(a) == "active", f"{where}: free_requested of a block that is not live")
                live_blocks[a] = "pending"
            elif e["action"] == "free_completed":
                check(live_blocks.get(a) == "pending", f"{where}: free_completed without free_requested")
                del live_blocks[a]
            elif e["action"] == "segment_free":
                busy = [b for b in live_blocks if a <= b < a + live_segments.get(a, 0)]
                check(a in live_segments and not busy, f"{where}: segment_free of a busy segment")
                live_segments.pop(a, None)
        # Forward from nothing the traces end in the segments of this device ...
        final = {s["address"]: s["total_size"] for s in segs if s["device"] == dev}
        check(live_segments == final, f"{name} device {dev}: segments at the end of the trace {live_segments} "
                                      f"!= snapshot segments {final}")
        # ... and backward from the segments (the viewer's state history) every step is legal. The
        # viewer tracks the active blocks; inactive ones are the free space between them.
        sizes = {s["address"]: s["total_size"] for s in segs if s["device"] == dev}
        state = {s["address"]: {b["address"]: b["state"] for b in s["blocks"] if b["state"] != "inactive"}
                 for s in segs if s["device"] == dev}
        blocks = {a: st for seg in state.values() for a, st in seg.items()}
        for i, e in reversed(list(enumerate(trace))):
            a, where = e["addr"], f"{name} device {dev} entry {i} (backward)"
            if e["action"] == "alloc":
                check(blocks.get(a) == "active_allocated", f"{where}: undoing alloc of a block that is not active")
                blocks.pop(a, None)
            elif e["action"] == "free_completed":
                check(a not in blocks, f"{where}: undoing a free of a live block")
                blocks[a] = "active_pending_free"
            elif e["action"] == "free_requested":
                check(blocks.get(a) == "active_pending_free", f"{where}: undoing free_requested of a block not pending")
                blocks[a] = "active_allocated"
            elif e["action"] == "segment_free":
                check(a not in state, f"{where}: undoing segment_free of a live segment")
                state[a] = {}
                sizes[a] = e["size"]
            elif e["action"] == "segment_alloc":
                busy = [b for b in blocks if a <= b < a + sizes.get(a, 0)]
                check(a in state and not busy, f"{where}: undoing segment_alloc of a missing or busy segment")
                state.pop(a, None)
        check(not state and not blocks, f"{name} device {dev}: memory left before the first entry: {state} {blocks}")
    if expect_segments is not None:
        check(len(segs) == expect_segments, f"{name}: {len(segs)} segments, expected {expect_segments}")
    return snap


def check_perfetto(path, name, expect):
    doc = json.load(open(path))
    check(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), f"{name}: no traceEvents list")
    events = doc.get("traceEvents", [])
    counts = {}
    open_async = {}
    x_by_thread = {}
    for i, e in enumerate(events):
        where = f"{name} event {i}"
        ph = e.get("ph")
        counts[ph] = counts.get(ph, 0) + 1
        check(isinstance(e.get("name"), str) and e["name"] != "", f"{where}: name")
        check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), f"{where}: pid/tid")
        if ph == "M":
            check(e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"),
                  f"{where}: metadata {e['name']}")
            check(isinstance(e.get("args", {}).get("name"), str), f"{where}: metadata without args.name")
            continue
        check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"{where}: ts")
        if ph == "X":
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"{where}: dur")
            x_by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "C":
            args = e.get("args")
            check(isinstance(args, dict) and args and all(isinstance(v, (int, float)) for v in args.values()),
                  f"{where}: counter args {args}")
        elif ph in ("b", "e"):
            key = (e.get("cat"), e.get("id"), e["name"])
            check(e.get("id") is not None and e.get("cat"), f"{where}: async event without id/cat")
            if ph == "b":
                check(key not in open_async, f"{where}: async slice {key} begun twice")
                open_async[key] = e["ts"]
            else:
                check(key in open_async and open_async[key] <= e["ts"], f"{where}: async end without begin {key}")
                open_async.pop(key, None)
        elif ph == "i":
            check(e.get("s") in ("g", "p", "t"), f"{where}: instant scope")
        else:
            check(False, f"{where}: unexpected phase type {ph}")
    check(not open_async, f"{name}: async slices never ended: {list(open_async)}")
    # Complete slices of one thread must nest (Perfetto drops slices that overlap partially).
    for tid, slices in x_by_thread.items():
        stack = []
        for b, e, n in sorted(slices, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= b:
                stack.pop()
            check(not stack or e <= stack[-1][1], f"{name}: slice {n} overlaps {stack[-1][2] if stack else ''} "
                                                  f"on thread {tid}")
            stack.append((b, e, n))
    for ph, n in expect.items():
        check(counts.get(ph, 0) == n, f"{name}: {counts.get(ph, 0)} events of type {ph}, expected {n}")
    return events


def check_svg(root, name, phases, captures, compiles, memguard_gcs, ooms, peak_text, min_steps=10):
    check(root.tag == SVG + "svg", f"{name}: root is {root.tag}")
    check(float(root.get("width", "0")) > 0 and float(root.get("height", "0")) > 0, f"{name}: no size")
    live = [p for p in root.iter(SVG + "path") if p.get("id") == "live"]
    check(len(live) == 1 and live[0].get("d", "").count("L") >= min_steps, f"{name}: the live series is missing or empty")
    groups = lambda cls: [g for g in root.iter(SVG + "g") if g.get("class") == cls]
    check(len(groups("phase")) == phases, f"{name}: {len(groups('phase'))} phase spans, expected {phases}")
    check(len(groups("capture")) == captures, f"{name}: {len(groups('capture'))} capture windows, expected {captures}")
    check(len(groups("compile")) == compiles, f"{name}: {len(groups('compile'))} compile marks, expected {compiles}")
    check(len(groups("gc_memguard")) == memguard_gcs, f"{name}: memguard collections drawn")
    check(len(groups("oom")) == ooms, f"{name}: {len(groups('oom'))} OOM marks, expected {ooms}")
    for g in groups("phase") + groups("capture") + groups("compile") + groups("oom"):
        check(g.find(SVG + "title") is not None, f"{name}: a mark without a hover title")
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG + "text"))
    if peak_text:
        peak = [g for g in root.iter(SVG + "g") if g.get("id") == "peak"]
        check(len(peak) == 1 and peak[0].find(SVG + "circle") is not None, f"{name}: no peak marker")
        check(peak_text in texts, f"{name}: the peak annotation {peak_text!r} is missing")


def main_plain(cli, golden):
    tmp = tempfile.mkdtemp(prefix="memguard-exports-")
    try:
        train = os.path.join(golden, "train.mgr")
        # memory_viz, on reports of every minor: 1.4 (phases, VMM), 1.2 (captures, Python stacks), 1.0.
        for mgr, segs in (("train.mgr", 4), ("graphs.mgr", None), ("gc.mgr", 1), ("basic.mgr", None)):
            out = os.path.join(tmp, mgr + ".pickle")
            p = run(cli, "export", "--memory-viz", os.path.join(golden, mgr), "-o", out)
            check(p.stdout.startswith("wrote " + out), f"export {mgr}: stdout {p.stdout!r}")
            if os.path.exists(out):
                snap = check_memory_viz(out, mgr, segs)
                if mgr == "train.mgr":
                    # Python frames are in the traces (the outermost frames of the allocating thread).
                    names = [f["name"] for e in snap["device_traces"][0] for f in e["frames"]]
                    check("load_parameters" in names and "forward" in names, "train.mgr: Python frames missing")
                    # The first allocation's frames, innermost first: its two native frames (not symbolized
                    # here: module+offset), then its Python frame (no interpreter frame to put it at).
                    first = [(f["filename"], f["line"], f["name"]) for f in snap["device_traces"][0][0]["frames"]]
                    check(first == [("/opt/memguard-golden/lib/libtorch_cuda.so", 0,
                                     "/opt/memguard-golden/lib/libtorch_cuda.so+0x1000"),
                                    ("/opt/memguard-golden/bin/python3", 0, "/opt/memguard-golden/bin/python3+0x401000"),
                                    ("/opt/app/train.py", 12, "load_parameters")], f"train.mgr: first frames {first}")
                    # 9 A records and 1 Q (a mapping of device memory): segment_alloc + alloc each;
                    # 5 F and 1 q: free_requested + free_completed + segment_free each.
                    check(len(snap["device_traces"][0]) == 10 * 2 + 6 * 3, "train.mgr: trace entries")
                    mapped = [e for e in snap["device_traces"][0] if e["addr"] == 0x7f4000000000]
                    check([e["action"] for e in mapped] == ["segment_alloc", "alloc", "free_requested", "free_completed",
                                                            "segment_free"] and mapped[0]["size"] == 256 << 20
                          and any(f["name"] == "step" and f["filename"].endswith("adamw.py") for f in mapped[0]["frames"]),
                          "train.mgr: the mapping of the expandable segment (Q ... q) is not exported with its N's stack")
        # Expandable segments: memory reached only through the driver's virtual memory calls, two
        # mappings of one handle still mapped at the end, one unmapped before; the handle of device -1
        # (not device memory) is not exported.
        vmm = os.path.join(tmp, "vmm.mgr")
        with open(vmm, "w") as f:
            f.write("MEMGUARD-REPORT 1\nI format_minor 3\nI pid 9\nS 1 7f00\n"
                    "V 10 9 7f0000000000 67108864 1 0\nN 20 9 a1 4194304 0 1 0 0\nN 21 9 a2 2097152 0 1 0 0\n"
                    "N 22 9 a3 2097152 -1 1 0 0\nQ 30 9 7f0000000000 4194304 0 a1\nQ 31 9 7f0000400000 2097152 0 a2\n"
                    "Q 32 9 7f0000600000 2097152 0 a3\nq 40 9 7f0000400000 2097152\nn 41 9 a2\n"
                    "Q 50 9 7f0000800000 4194304 0 a1\nZ 60\n")
        out = os.path.join(tmp, "vmm.pickle")
        run(cli, "export", "--memory-viz", vmm, "-o", out)
        if os.path.exists(out):
            snap = check_memory_viz(out, "vmm.mgr", expect_segments=2)
            check(all(s["is_expandable"] for s in snap["segments"]), "vmm.mgr: segments of mappings are not expandable")
            check(sorted(s["address"] for s in snap["segments"]) == [0x7f0000000000, 0x7f0000800000],
                  f"vmm.mgr: segments {[hex(s['address']) for s in snap['segments']]}")
        # Perfetto.
        out = os.path.join(tmp, "train.json")
        run(cli, "export", "--perfetto", train, "-o", out)
        if os.path.exists(out):
            # 8 phases as complete slices and 1 NVTX start/end range + 1 capture as async pairs;
            # 2 marks + 1 compile as instants; 2 collections as complete slices.
            events = check_perfetto(out, "train.json", {"X": 8 + 2, "b": 2, "e": 2, "i": 3})
            counters = [e for e in events if e["ph"] == "C" and e["name"] == "GPU live bytes"]
            check(max(e["args"]["bytes"] for e in counters) == 2952790016, "train.json: counter peak != 2.75 GiB")
            check(any(e["ph"] == "C" and e["name"] == "mapped bytes" for e in events), "train.json: no mapped bytes")
        out = os.path.join(tmp, "basic.json")
        run(cli, "export", "--perfetto", os.path.join(golden, "basic.mgr"), "-o", out)
        if os.path.exists(out):
            events = check_perfetto(out, "basic.json", {"X": 0, "b": 0, "i": 0})
            check(not any(e["name"] == "tensor bytes" for e in events), "basic.json: tensor bytes without the allocator")
        # Allocator mode: a tensor bytes counter beside the segments', peaking at the tensor peak.
        out = os.path.join(tmp, "alloc_b.json")
        run(cli, "export", "--perfetto", os.path.join(golden, "alloc_b.mgr"), "-o", out)
        if os.path.exists(out):
            events = check_perfetto(out, "alloc_b.json", {"X": 1 + 2, "i": 1})
            tensor = [e["args"]["bytes"] for e in events if e["ph"] == "C" and e["name"] == "tensor bytes"]
            check(tensor and max(tensor) == 16 << 20 and tensor[-1] == 1 << 20, f"alloc_b.json: tensor bytes {tensor}")
            # The phase and the mark in tensor bytes, as `memguard phases` gives them.
            step = [e["args"] for e in events if e.get("cat") == "phase" and e["name"] == "step"]
            mark = [e["args"] for e in events if e.get("cat") == "mark"]
            check(step and step[0]["peak_bytes"] == 16 << 20 and step[0]["entry_bytes"] == 12 << 20 and
                  step[0]["bytes_of"] == "tensors" and mark and mark[0]["live_bytes"] == 15 << 20,
                  f"alloc_b.json: phase {step}, mark {mark}")
        # Allocator mode: the A/F blocks are segments, the tensor blocks the allocations inside them.
        out = os.path.join(tmp, "alloc_b.pickle")
        p = run(cli, "export", "--memory-viz", os.path.join(golden, "alloc_b.mgr"), "-o", out)
        check("tensor block(s)" not in p.stderr, f"alloc_b.mgr: a consistent report exported with notes: {p.stderr!r}")
        if os.path.exists(out):
            snap = check_memory_viz(out, "alloc_b.mgr", 2)
            trace = snap["device_traces"][0]
            actions = [e["action"] for e in trace]
            check(actions.count("segment_alloc") == 2 and actions.count("alloc") == 6 and
                  actions.count("free_completed") == 5 and "segment_free" not in actions,
                  f"alloc_b.mgr: trace actions {actions}")
            # A tensor block inside a segment, not at its base, with its own size and Python frames.
            inner = [e for e in trace if e["action"] == "alloc" and e["addr"] == 0x7f0000400000]
            check(len(inner) == 1 and inner[0]["size"] == 8 << 20 and
                  any(f["name"] == "forward" for f in inner[0]["frames"]), f"alloc_b.mgr: the 8 MiB block {inner}")
            small = [s for s in snap["segments"] if s["address"] == 0x7f1000000000]
            check(len(small) == 1 and small[0]["segment_type"] == "small" and
                  [(b["size"], b["state"], b["requested_size"]) for b in small[0]["blocks"]] ==
                  [(1 << 20, "active_allocated", 1000000), (1 << 20, "inactive", 0)],
                  f"alloc_b.mgr: the capture's segment {small}")
            # Its pool is the one PyTorch named (the T record's 1.2), the others the default (0, 0).
            check(small and small[0]["segment_pool_id"] == (1, 2) and
                  all(s["segment_pool_id"] == (0, 0) for s in snap["segments"] if s is not small[0]),
                  f"alloc_b.mgr: segment pools {[(hex(s['address']), s['segment_pool_id']) for s in snap['segments']]}")
        # A report that lost records (hand-written): a tensor block outside every segment, a segment
        # freed under a live block, its address reused, a block overlapping a live one; and memory
        # that is not the allocator's (a cudaMalloc with no tensor block in it, a cuMemMap). The
        # snapshot must still replay; the foreign memory is one block per segment.
        out = os.path.join(tmp, "alloc_lost.pickle")
        p = run(cli, "export", "--memory-viz", os.path.join(golden, "alloc_lost.mgr"), "-o", out)
        check("1 tensor block(s) lie in no live segment" in p.stderr and "2 tensor block(s) still live" in p.stderr,
              f"alloc_lost.mgr: the export does not say what it left out or ended: {p.stderr!r}")
        if os.path.exists(out):
            snap = check_memory_viz(out, "alloc_lost.mgr", 3)
            actions = [(e["action"], e["addr"]) for e in snap["device_traces"][0]]
            seg, inner, over, lib, mapped = 0x7f0000000000, 0x7f0000100000, 0x7f0000080000, 0x7f5000000000, 0x7f4000000000
            check(actions == [("segment_alloc", seg), ("alloc", seg), ("free_requested", seg), ("free_completed", seg),
                              ("segment_free", seg), ("segment_alloc", seg), ("alloc", inner),
                              ("free_requested", inner), ("free_completed", inner), ("alloc", over),
                              ("segment_alloc", lib), ("alloc", lib), ("segment_alloc", mapped), ("alloc", mapped)],
                  f"alloc_lost.mgr: trace {actions}")
            shapes = {s["address"]: (s["is_expandable"], [(b["state"], b["size"]) for b in s["blocks"]])
                      for s in snap["segments"]}
            check(shapes == {seg: (False, [("inactive", 512 << 10), ("active_allocated", 1 << 20), ("inactive", 512 << 10)]),
                             lib: (False, [("active_allocated", 4 << 20)]),
                             mapped: (True, [("active_allocated", 2 << 20)])}, f"alloc_lost.mgr: segments {shapes}")
        # plot: SVG and HTML.
        out = os.path.join(tmp, "train.svg")
        run(cli, "plot", train, "-o", out)
        if os.path.exists(out):
            check_svg(ET.parse(out).getroot(), "train.svg", phases=9, captures=1, compiles=1, memguard_gcs=1, ooms=1,
                      peak_text="peak 2.75 GiB at 1.600 s")
            if shutil.which("rsvg-convert"):
                png = os.path.join(tmp, "train.png")
                subprocess.run(["rsvg-convert", out, "-o", png], check=False)
                check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
                      and os.path.getsize(png) > 10000, "train.svg: rsvg-convert did not render it")
                print(f"rendered train.svg to a {os.path.getsize(png) if os.path.exists(png) else 0}-byte PNG")
            else:
                print("rsvg-convert is not installed (tools/setup.sh installs librsvg2-bin): SVG checked as XML only")
        out = os.path.join(tmp, "train.html")
        run(cli, "plot", train, "-o", out)
        if os.path.exists(out):
            html = open(out, encoding="utf-8").read()
            check(html.startswith("<!DOCTYPE html>") and "</html>" in html, "train.html: not an HTML document")
            svg = html[html.find("<svg"):html.find("</svg>") + len("</svg>")]
            check_svg(ET.fromstring(svg), "train.html", phases=9, captures=1, compiles=1, memguard_gcs=1, ooms=1,
                      peak_text="peak 2.75 GiB at 1.600 s")
        # Allocator mode: the tensor bytes as a line over the segments, its O record as an OOM mark.
        out = os.path.join(tmp, "alloc_b.svg")
        run(cli, "plot", os.path.join(golden, "alloc_b.mgr"), "-o", out)
        if os.path.exists(out):
            root = ET.parse(out).getroot()
            # The note marks the tensor peak (`top`'s), with the tensor blocks' largest site; the
            # segments' peak is in the subtitle.
            check_svg(root, "alloc_b.svg", phases=1, captures=1, compiles=0, memguard_gcs=0, ooms=1,
                      peak_text="tensor peak 16.00 MiB at 0.350 s", min_steps=2)
            peak_title = "".join(next(g for g in root.iter(SVG + "g") if g.get("id") == "peak").find(SVG + "title").itertext())
            check("top site: forward at /opt/app/model.py:20 (9.00 MiB, 56.2%)" in peak_title,
                  f"alloc_b.svg: the peak's site is not the tensor blocks' at the tensor peak: {peak_title!r}")
            sub = [t for t in root.iter(SVG + "text") if t.get("class") == "sub"]
            check(sub and "segments peak 22.00 MiB at 0.550 s" in "".join(sub[0].itertext()),
                  f"alloc_b.svg: the subtitle does not give the segments' peak")
            tensor = [p for p in root.iter(SVG + "path") if p.get("id") == "tensor"]
            # 0, 4, 12, 13, 15, 16, 8, 7, 5, 6, 5, 1 MiB: a step (two vertices) per change.
            check(len(tensor) == 1 and tensor[0].get("d", "").count("L") >= 20, "alloc_b.svg: no tensor series")
            check("tensor bytes" in " ".join("".join(t.itertext()) for t in root.iter(SVG + "text")),
                  "alloc_b.svg: the legend does not name the tensor series")
            tips = [g.find(SVG + "title").text for g in root.iter(SVG + "g") if g.get("class") == "phase"]
            check(tips and "tensor bytes: entry 12.00 MiB, peak 16.00 MiB" in tips[0], f"alloc_b.svg: phase tip {tips}")
        out = os.path.join(tmp, "train_no_tensors.svg")
        run(cli, "plot", train, "-o", out)
        if os.path.exists(out):
            check(not [p for p in ET.parse(out).getroot().iter(SVG + "path") if p.get("id") == "tensor"],
                  "train.svg: a tensor series without allocator mode")
        # A report with no GPU memory ever live still plots (no peak).
        out = os.path.join(tmp, "minor1.svg")
        run(cli, "plot", os.path.join(golden, "gc.mgr"), "-o", out)
        if os.path.exists(out):
            check_svg(ET.parse(out).getroot(), "gc.svg", phases=0, captures=0, compiles=3, memguard_gcs=2, ooms=0,
                      peak_text="peak 3.00 MiB", min_steps=2)
        # An output that cannot be written: one message, exit 2, nothing left behind.
        bad = os.path.join(tmp, "no-such-dir", "x.svg")
        p = run(cli, "plot", train, "-o", bad, rc=2)
        check(p.stderr.count("\n") == 1 and "cannot write" in p.stderr, f"unwritable output: stderr {p.stderr!r}")
    finally:
        shutil.rmtree(tmp)


def main_torch(cli, golden):
    try:
        import torch  # noqa: F401
        import torch.cuda._memory_viz as mv
    except Exception as e:  # noqa: BLE001
        print(f"skipped: torch cannot be imported ({e})")
        return 77
    print(f"torch {torch.__version__}")
    tmp = tempfile.mkdtemp(prefix="memguard-viz-")
    try:
        for mgr in ("train.mgr", "graphs.mgr", "gc.mgr", "alloc_b.mgr", "alloc_lost.mgr"):
            out = os.path.join(tmp, mgr + ".pickle")
            run(cli, "export", "--memory-viz", os.path.join(golden, mgr), "-o", out)
            if not os.path.exists(out):
                continue
            with open(out, "rb") as f:
                snap = pickle.load(f)
            text = mv.trace(snap)
            check("Device 0" in text and "cudaMalloc(" in text, f"{mgr}: trace() shows no allocations")
            summary = mv.segsum(snap)  # raises "Segment size mismatch" on inconsistent segments
            check("segments:" in summary, f"{mgr}: segsum output {summary[:80]!r}")
            flame = mv.segments(snap, format_flamegraph=lambda lines: lines)
            check(all(line.rsplit(" ", 1)[-1].isdigit() for line in flame.splitlines()), f"{mgr}: segments() lines")
            mv.memory(snap, format_flamegraph=lambda lines: lines)
            mv.compare(snap["segments"], snap["segments"], format_flamegraph=lambda lines: lines)
            for html in (mv.trace_plot(snap), mv.segment_plot(snap), mv.trace_plot(snap, plot_segments=True)):
                check("snapshot.pickle" in html and "base64" in html, f"{mgr}: plot html")
            print(f"{mgr}: {len(snap['segments'])} segments, {sum(len(t) for t in snap['device_traces'])} trace entries")
        if os.path.exists(os.path.join(tmp, "train.mgr.pickle")):
            snap = pickle.load(open(os.path.join(tmp, "train.mgr.pickle"), "rb"))
            text = mv.trace(snap)
            check("TOTAL MEM" in text, "train.mgr: trace() total")
    finally:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    use_torch = args[:1] == ["--torch"]
    if use_torch:
        args = args[1:]
    cli, golden = args
    rc = main_torch(cli, golden) if use_torch else (main_plain(cli, golden) or 0)
    if rc == 77:
        sys.exit(77)
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failures")
    sys.exit(1 if failures else 0)
