# Driver entry points: expandable segments (the virtual-memory calls), cudaMallocAsync, a static
# cudart, NCCL's and cuBLAS's own allocations, cuMem memory shared between two processes. Exec'd by
# acceptance.py (check, workload, reports, records, Skip, ctx, HERE are its names). Each check reads
# the report's records itself (docs/report-format.md, minors 3 and 11), independently of the CLI,
# and prints what it saw.
import json
import os
import shutil


def _replay_vmm(path, upto=None):
    """Mapped / reserved / physical bytes after the records in the first `upto` bytes of the report
    (docs/report-format.md, derived figures of minor 3)."""
    mappings, reserved, handles, released, counts = {}, {}, {}, set(), {}
    with open(path, "rb") as f:
        data = f.read() if upto is None else f.read(upto)
    for raw in data.decode(errors="replace").splitlines():
        r = raw.split()
        if not r or r[0] not in "VvNnQq" or len(r[0]) != 1:
            continue
        counts[r[0]] = counts.get(r[0], 0) + 1
        t = r[0]
        if t == "V":
            reserved[int(r[3], 16)] = int(r[4])
        elif t == "v":
            reserved.pop(int(r[3], 16), None)
        elif t == "N":
            handles[int(r[3], 16)] = int(r[4])
        elif t == "n":
            released.add(int(r[3], 16))
        elif t == "Q":
            mappings[int(r[3], 16)] = (int(r[4]), int(r[6], 16))
        elif t == "q":
            lo, size = int(r[3], 16), int(r[4])
            for va in [va for va in mappings if lo <= va < lo + size]:
                del mappings[va]
        mapped_handles = {h for (_, h) in mappings.values()}
        for h in [h for h in released if h not in mapped_handles]:
            handles.pop(h, None)
            released.discard(h)
    return {"mapped": sum(s for s, _ in mappings.values()), "reserved": sum(reserved.values()),
            "physical": sum(handles.values()), "counts": counts}


def _live_by_api(path, upto, apis):
    """Bytes of blocks allocated by one of `apis` and live after the first `upto` bytes."""
    live = {}
    with open(path, "rb") as f:
        data = f.read(upto)
    n_alloc = 0
    for raw in data.decode(errors="replace").splitlines():
        r = raw.split()
        if not r:
            continue
        if r[0] == "A" and r[6] in apis:
            live[r[3]] = int(r[4])
            n_alloc += 1
        elif r[0] == "F":
            live.pop(r[3], None)
        elif r[0] == "R":
            pass  # a failed free: the block is live again (not expected here)
    return sum(live.values()), n_alloc


@check("driver-entry-points", "expandable_segments: mapped bytes in the report = torch.cuda.memory_reserved() at each point")
def expandable_mapped_bytes(ctx):
    data = workload(ctx, "driver_points", "expandable", True, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    points = data["points"]
    assert points and all("offset" in p for p in points), "memguard_flush/memguard_report_path unavailable: %s" % points[:1]
    report = points[0]["report"]
    bad = []
    for p in points:
        v = _replay_vmm(report, p["offset"])
        print(f"  {p['label']:>12}: reserved {p['reserved']:>11}  mapped {v['mapped']:>11}  "
              f"physical {v['physical']:>11}  address space {v['reserved']:>13}")
        if v["mapped"] != p["reserved"]:
            bad.append(p["label"])
    final = _replay_vmm(report)
    print("  record counts:", final["counts"])
    a_count = len(records(report, "A"))
    print("  A records (runtime allocations) in the run:", a_count)
    assert final["counts"].get("Q", 0) > 0, "no cuMemMap recorded with expandable segments"
    assert max(p["reserved"] for p in points) > 0
    assert not bad, f"mapped bytes differ from memory_reserved() at {bad}"


@check("driver-entry-points", "backend:cudaMallocAsync: every allocation recorded (live async bytes = memory_allocated())")
def async_backend_recorded(ctx):
    data = workload(ctx, "driver_points", "async", True, env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    points = data["points"]
    assert points and all("offset" in p for p in points)
    report = points[0]["report"]
    bad = []
    for p in points:
        live, n = _live_by_api(report, p["offset"], {"cudaMallocAsync", "cudaMallocFromPoolAsync", "cuMemAllocAsync",
                                                     "cuMemAllocFromPoolAsync"})
        print(f"  {p['label']:>12}: memory_allocated {p['allocated']:>11}  live async bytes {live:>11}  "
              f"async allocations so far {n}")
        if live != p["allocated"]:
            bad.append(p["label"])
    apis = {}
    for r in records(report, "A"):
        apis[r[6]] = apis.get(r[6], 0) + 1
    print("  A records by api:", apis)
    assert apis.get("cudaMallocAsync", 0) + apis.get("cuMemAllocAsync", 0) > 10, apis
    assert not bad, f"live async bytes differ from memory_allocated() at {bad}"


def _nvcc():
    for c in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", "/usr/local/cuda-13.0/bin/nvcc"):
        if c and os.path.exists(c):
            return c
    return None


@check("driver-entry-points", "nvcc program with the default static cudart: every allocation and free recorded")
def static_cudart_program(ctx):
    nvcc = _nvcc()
    if nvcc is None:
        raise Skip("no nvcc")
    exe = ctx.out / "static_cudart"
    ctx.run([nvcc, "-O1", "-cudart", "static", "-o", str(exe), str(HERE / "apps" / "static_cudart.cu")])
    needed = ctx.run(["readelf", "-d", str(exe)]).stdout
    print("  NEEDED of the program:", [l.split("[")[-1].rstrip("]") for l in needed.splitlines() if "NEEDED" in l])
    assert "libcudart" not in needed, "the program links libcudart dynamically"
    p = ctx.run([str(exe)], env={"MEMGUARD_OUTPUT": str(ctx.out / "static_cudart.%p.mgr")}, preload=True)
    files = reports(ctx, "static_cudart.")
    assert len(files) == 1, files
    allocs = {r[3]: r for r in records(files[0], "A")}
    frees = {r[3]: r for r in records(files[0], "F")}
    missing = []
    for line in p.stdout.splitlines():
        w = line.split()
        if w and w[0] == "alloc":
            r = allocs.get(w[2])
            print(f"  {w[1]:>18} {w[2]} {w[3]:>9} -> " + (f"A {r[4]} {r[5]} {r[6]}" if r else "NOT RECORDED"))
            if not r or r[4] != w[3]:
                missing.append(line)
        elif w and w[0] == "free":
            r = frees.get(w[2])
            print(f"  {w[1]:>18} {w[2]} -> " + (f"F {r[5]}" if r else "NOT RECORDED"))
            if not r:
                missing.append(line)
    assert "done" in p.stdout
    assert not missing, f"not recorded: {missing}"
    # cudaMallocHost: a pinned block that cuMemFreeHost frees. CUDA 13.0's libcudart_static.a names
    # cuMemHostAlloc but not cuMemAllocHost(_v2) among the driver functions it looks up (strings of
    # the archive), so its cudaMallocHost is recorded under cuMemHostAlloc; cuMemAllocHost is
    # covered for programs that call the driver API themselves (tests/preload/driver_test.cpp).
    malloc_host = [line.split() for line in p.stdout.splitlines() if line.startswith("alloc cudaMallocHost ")]
    assert len(malloc_host) == 1, malloc_host
    a = allocs[malloc_host[0][2]]
    f = frees.get(malloc_host[0][2])
    print(f"  cudaMallocHost -> A kind {a[5]} api {a[6]}; F api {f[5] if f else None}")
    assert (a[5], a[6]) == ("pinned", "cuMemHostAlloc"), \
        f"cudaMallocHost recorded as kind {a[5]} api {a[6]}, expected pinned cuMemHostAlloc"
    assert f is not None and f[5] == "cuMemFreeHost", f
    # The driver API's cuMemAllocHost, looked up with cuGetProcAddress_v2 at 13000 (_v2) and at 2000
    # (the 32-bit-size ABI, when the driver still has it): pinned blocks under cuMemAllocHost.
    driver_host = [line.split() for line in p.stdout.splitlines() if line.startswith("alloc cuMemAllocHost")]
    print("  driver cuMemAllocHost calls:", [w[1] for w in driver_host],
          "(no 2000 ABI)" if "info cuMemAllocHost@2000 not found" in p.stdout else "",
          *[line for line in p.stdout.splitlines() if line.startswith("info cuMemAllocHost@2000 failed")])
    assert driver_host and driver_host[0][1] == "cuMemAllocHost", driver_host
    for w in driver_host:
        a, f = allocs[w[2]], frees.get(w[2])
        assert (a[5], a[6]) == ("pinned", "cuMemAllocHost"), f"{w[1]} recorded as kind {a[5]} api {a[6]}"
        assert f is not None and f[5] == "cuMemFreeHost", (w, f)


def _modules_and_stacks(path):
    modules, stacks = [], {}
    for r in records(path, "MS"):
        if r[0] == "M":
            modules.append((int(r[2], 16), int(r[3], 16), os.path.basename(r[6]) if len(r) > 6 else "?"))
        else:
            stacks[r[1]] = [int(x, 16) for x in r[2:]]
    return modules, stacks


def _stack_modules(ips, modules):
    names = []
    for ip in ips:
        for lo, hi, name in modules:
            if lo <= ip < hi:
                names.append(name)
                break
    return names


@check("driver-entry-points", "NCCL's and cuBLAS's own allocations appear with their libraries in the native stacks")
def nccl_cublas_sites(ctx):
    env = {"NCCL_DEBUG": "WARN", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533"}
    data = workload(ctx, "nccl_cublas", "preload", True, env=env)
    print("  torch", data["torch"], "nccl", data["nccl"])
    files = reports(ctx, "nccl_cublas_preload.")
    assert len(files) == 1, files
    modules, stacks = _modules_and_stacks(files[0])
    found = {"nccl": [], "cublas": []}
    for r in records(files[0], "AN"):
        sid = r[9] if r[0] == "A" else r[6]
        names = _stack_modules(stacks.get(sid, []), modules)
        kind = r[5] if r[0] == "A" else "physical"
        api = r[6] if r[0] == "A" else "cuMemCreate"
        size = int(r[4])
        if any(n.startswith("libnccl") for n in names):
            found["nccl"].append((api, kind, size, names[:4]))
        if any(n.startswith("libcublas") for n in names):
            found["cublas"].append((api, kind, size, names[:4]))
    for lib, rows in found.items():
        print(f"  {lib}: {len(rows)} allocations, {sum(r[2] for r in rows)} bytes")
        for api, kind, size, names in rows[:6]:
            print(f"     {api:>24} {kind:>8} {size:>11}  {' <- '.join(names)}")
    assert found["nccl"], "no allocation with a libnccl frame"
    assert found["cublas"], "no allocation with a libcublas/libcublasLt frame"


@check("driver-entry-points", "cuMem IPC between two processes (NCCL's peer buffers): the importer's report has "
                              "its m, maps it and releases it without a warning, and counts none of it as its memory")
def cumem_ipc(ctx):
    nvcc = _nvcc()
    if nvcc is None:
        raise Skip("no nvcc")
    exe = ctx.out / "cumem_ipc"
    ctx.run([nvcc, "-O1", "-o", str(exe), str(HERE / "apps" / "cumem_ipc.cpp"), "-lcuda"])
    p = ctx.run([str(exe)], env={"MEMGUARD_OUTPUT": str(ctx.out / "cumem_ipc.%p.mgr")}, preload=True)
    print("  " + p.stdout.strip().replace("\n", "\n  "))
    said = {w[0]: w for w in (line.split() for line in p.stdout.splitlines()) if w}
    assert "done" in said, p.stdout + p.stderr[-2000:]
    exporter, importer = said["exporter"], said["importer"]
    size = int(exporter[4])
    assert importer[6] == "5a", f"the importer read {importer[6]}, not the exporter's 5a"
    files = reports(ctx, "cumem_ipc.")
    assert len(files) == 2, files
    imports = {f: records(f, "m") for f in files}
    mine = [f for f in files if imports[f]]
    assert len(mine) == 1, {f.name: len(v) for f, v in imports.items()}
    imp_file, exp_file = mine[0], [f for f in files if f != mine[0]][0]
    # The importer's report: m, a Q and an n of the handle the driver gave it; no N.
    handle = importer[2]
    assert [r[3] for r in imports[imp_file]] == [handle], imports[imp_file]
    maps = [r for r in records(imp_file, "Q") if r[6] == handle]
    releases = [r for r in records(imp_file, "n") if r[3] == handle]
    print(f"  importer's report {imp_file.name}: m {handle}, {len(maps)} Q of {maps and maps[0][4]} bytes, "
          f"{len(releases)} n; N records {len(records(imp_file, 'N'))}")
    assert len(maps) == 1 and int(maps[0][4]) == size and len(releases) == 1, (maps, releases)
    assert not records(imp_file, "N")
    # The exporter's: its N and n of its handle.
    created = [r for r in records(exp_file, "N") if r[3] == exporter[2]]
    assert len(created) == 1 and int(created[0][4]) == size, created
    assert [r[3] for r in records(exp_file, "n")] == [exporter[2]]
    # The CLI: the import known (no warning), mapped, and not the importer's physical memory.
    for f, physical in ((imp_file, 0), (exp_file, size)):
        q = ctx.run([str(ctx.cli), "summary", "--json", str(f)])
        v = json.loads(q.stdout)["virtual"]
        print(f"  summary --json {f.name}: peak mapped {v['peak_mapped_bytes']}, peak physical "
              f"{v['peak_physical_bytes']}, imports {v['counts']['imports']}; stderr {q.stderr.strip()[:300]!r}")
        assert "record made" not in q.stderr and "record created" not in q.stderr, q.stderr
        assert v["peak_mapped_bytes"] == size and v["peak_physical_bytes"] == physical, v
        assert v["counts"]["imports"] == (1 if f == imp_file else 0), v
    text = ctx.run([str(ctx.cli), "summary", str(imp_file)]).stdout
    print("  " + "\n  ".join(line for line in text.splitlines() if line.startswith("  ") and
                              any(w in line for w in ("mapped", "physical", "imported"))))
    assert "imported" in text
