# The compile-garbage collector on CUDA: the cold incremental peak it saves, the bytes `memguard
# cycles` reports, and its cost on a warm compiled step. Exec'd by acceptance.py (check, workload,
# records, cli_print, reports, HERE, ctx are its names).


def garbage_run(ctx, tag, preload, env):
    return workload(ctx, "compile_garbage", tag, preload, env,
                    ("--device", "cuda", "--layers", "4", "--hold-mib", "512"))


@check("compile-garbage", "compile garbage on CUDA: lower cold incremental peak with the hook, bitwise-equal losses")
def compile_garbage_peak(ctx):
    on = garbage_run(ctx, "on", True, {})
    off = garbage_run(ctx, "off", True, {"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0"})
    plain = garbage_run(ctx, "plain", False, {})
    held = on["call0_leaked"] * (512 << 20)
    gib = 1 << 30
    print(f"held by the compile cycles: {on['call0_leaked']} x 512 MiB = {held / gib:.2f} GiB")
    for name, d in (("hook on", on), ("hook off", off), ("no memguard", plain)):
        print(f"{name:12s}: cold incremental peak {d['call0_incremental_peak'] / gib:.3f} GiB, warm "
              f"{d['call1_incremental_peak'] / gib:.3f} GiB, alive at backward {d['call0_alive_at_backward']}, "
              f"loss {d['call0_loss']} / {d['call1_loss']}, {d['seconds']:.1f} s")
    for key in ("call0_loss", "call1_loss"):
        assert on[key] == off[key] == plain[key], key
    saved = off["call0_incremental_peak"] - on["call0_incremental_peak"]
    print(f"the hook lowered the cold incremental peak by {saved / gib:.3f} GiB "
          f"({saved / held:.2f} of the held bytes)")
    assert all(n == 0 for n in on["call0_alive_at_backward"]), on["call0_alive_at_backward"]
    assert saved >= 0.5 * held, (saved, held)


@check("compile-garbage", "memguard cycles reports the CUDA bytes its collections freed")
def cycles_bytes(ctx):
    on = garbage_run(ctx, "on", True, {})
    files = reports(ctx, "compile_garbage_on.")
    assert len(files) == 1, files
    ys = [y for y in records(files[0], {"Y"}) if y[3] == "memguard"]
    freed = sum(int(y[8]) for y in ys if y[8] != "-")
    held = on["call0_leaked"] * (512 << 20)
    print(f"memguard collections: {len(ys)}, CUDA bytes freed {freed} (held {held}); compiles "
          f"{len(records(files[0], {'X'}))}")
    for y in ys:
        print("  ", " ".join(y))
    assert freed >= held, (freed, held)
    if (ctx.cli).exists():
        p = cli_print(ctx, "cycles", str(files[0]))
        if p.returncode == 0:
            j = json.loads(ctx.run([str(ctx.cli), "cycles", "--json", str(files[0])]).stdout)
            print("cycles --json totals:", j.get("totals"))
            assert j["totals"]["memguard"]["cuda_bytes_freed"] >= held


@check("compile-garbage", "benchmark: warm compiled step time with the hook vs without (4 runs each, alternating)")
def step_time(ctx):
    import statistics
    arms = {"no memguard": [], "memguard": []}
    extra = {}
    for rep in range(4):
        for name, preload in (("no memguard", False), ("memguard", True)):
            result = ctx.out / f"step_{rep}_{preload}.json"
            env = {"MEMGUARD_OUTPUT": str(ctx.out / f"step_{rep}.%p.mgr")}
            ctx.run([ctx.python, str(HERE / "workloads" / "step_time.py"), str(result), "--steps", "40"], env=env,
                    preload=preload)
            data = json.loads(result.read_text())
            arms[name].append(statistics.median(data["step_ms"]))
            extra[name] = data
    for name, meds in arms.items():
        print(f"{name:12s}: median step {statistics.mean(meds):.3f} ms (runs: {', '.join(f'{m:.3f}' for m in meds)}); "
              f"{extra[name]['collections_per_step']:.2f} collections per step; torch.cuda.memory_allocated() "
              f"{extra[name]['memory_allocated_us']:.1f} us, raw counter {extra[name]['raw_counter_us']:.1f} us")
    ratio = statistics.mean(arms["memguard"]) / statistics.mean(arms["no memguard"])
    print(f"ratio memguard / no memguard: {ratio:.4f}")
