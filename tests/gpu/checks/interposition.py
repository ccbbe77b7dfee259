# Interposition in a real training loop: the library is self-contained, sees every cudaMalloc and
# cudaFree PyTorch makes, changes no result, and the CLI reads its report. Exec'd by acceptance.py
# (check, workload, train_run, reports, parse_report, ctx are its names).

ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1"}


@check("interposition", "libmemguard.so has no NEEDED beyond glibc, libstdc++, libgcc_s")
def self_contained(ctx):
    out = ctx.run(["readelf", "-d", str(ctx.lib)]).stdout
    needed = set(re.findall(r"Shared library: \[(.+?)\]", out))
    print("NEEDED:", sorted(needed))
    assert needed <= ALLOWED_NEEDED, needed - ALLOWED_NEEDED


@check("interposition", "training loop: every cudaMalloc/cudaFree recorded (= num_device_alloc/free)")
def alloc_counts(ctx):
    data = train_run(ctx, "preload", preload=True)
    files = reports(ctx, "train_small_preload.")
    assert len(files) == 1, files
    allocs, frees, info = parse_report(files[0])
    n_malloc = sum(1 for a in allocs if a[6] == "cudaMalloc")
    n_free = sum(1 for f in frees if f[5] == "cudaFree")
    stats = data["stats"]
    print(f"torch {data['torch']}: num_device_alloc={stats['num_device_alloc']} num_device_free={stats['num_device_free']}")
    print(f"report {files[0].name}: cudaMalloc={n_malloc} cudaFree={n_free} (all A={len(allocs)}, all F={len(frees)})")
    assert stats["num_device_alloc"] > 0 and stats["num_device_free"] > 0
    assert n_malloc == stats["num_device_alloc"], (n_malloc, stats["num_device_alloc"])
    assert n_free == stats["num_device_free"], (n_free, stats["num_device_free"])


@check("interposition", "training loop: losses bitwise identical with and without the library")
def bitwise_losses(ctx):
    with_lib = train_run(ctx, "preload", preload=True)
    without = train_run(ctx, "plain", preload=False)
    print("with memguard:   ", with_lib["losses"])
    print("without memguard:", without["losses"])
    print(f"wall time: {with_lib['seconds']:.1f} s with, {without['seconds']:.1f} s without")
    assert with_lib["losses"] == without["losses"]


@check("interposition", "memguard summary/top read the report; top names the Python-facing PyTorch path")
def top_names_torch(ctx):
    train_run(ctx, "preload", preload=True)
    report = reports(ctx, "train_small_preload.")[0]
    summary = ctx.run([str(ctx.cli), "summary", str(report)])
    print(summary.stdout)
    sj = json.loads(ctx.run([str(ctx.cli), "summary", "--json", str(report)]).stdout)
    for key in ("allocations", "frees", "peak_bytes", "live_bytes_at_exit", "oom_events"):
        assert isinstance(sj[key], int), key
    top = ctx.run([str(ctx.cli), "top", str(report), "-n", "5", "--frames", "12"])
    print(top.stdout)
    tj = json.loads(ctx.run([str(ctx.cli), "top", "--json", "--frames", "64", str(report)]).stdout)
    python_paths = []
    for site in tj["sites"]:
        frames = [fr for fr in site["frames"] if fr.get("kind") == "python"]
        torch_frames = [f"{fr.get('function')} ({fr.get('file')}:{fr.get('line')})" for fr in frames
                        if "/torch/" in (fr.get("file") or "")]
        if torch_frames:
            python_paths.append((site["bytes"], torch_frames[0], frames[-1].get("file")))
    print("top sites' innermost PyTorch Python frame:")
    for bytes_, frame, outer in python_paths[:5]:
        print(f"  {bytes_ / (1 << 20):8.2f} MiB  {frame}  (called from {outer})")
    assert python_paths, "no top site names a PyTorch Python frame"
