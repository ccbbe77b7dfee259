# Steps, categories and out-of-memory context written by the library (issue 20). Exec'd by
# acceptance.py (check, workload, reports, records, ctx are its names). The workload is
# tests/gpu/workloads/insight_records.py. Record fields (docs/report-format.md, minor 8):
#   s t tid step source name          h t tid moment reason step       k t moment tensors blocks complete
#   g moment device addr size category label                            d moment device addr size requested state segment pool
#   x t tid device source requested rounded limit device_free device_total allocated reserved stack python_stack moment compile_pending capturing


def _insight(ctx, scenario, tag, env=None):
    data = workload(ctx, "insight_records", f"{scenario}_{tag}", True, env=env, args=(scenario,))
    files = reports(ctx, f"insight_records_{scenario}_{tag}.")
    assert len(files) == 1, files
    return data, files[0]


def _reader_accepts(ctx, path):
    p = ctx.run([str(ctx.cli), "summary", str(path)], check=False)
    assert p.returncode == 0, f"memguard summary refused {path.name}: {p.stderr[-2000:]}"


@check("insight-library", "steps found from AdamW's step with no code change; tag bytes = the real tensors' storage bytes")
def insight_steps_and_tags(ctx):
    data, path = _insight(ctx, "train", "native")
    print(f"torch {data['torch']}, report {path.name}")
    steps = records(path, {"s"})
    print("s records:", [(r[3], r[4], r[5]) for r in steps])
    assert [(r[3], r[4], r[5]) for r in steps] == [(str(i), "optimizer", "AdamW") for i in range(1, data["steps"] + 1)]
    lines = records(path, {"h", "g", "d", "k"})
    moments = [r for r in lines if r[0] == "h" and r[4] == "step"]
    ends = {r[2]: r for r in lines if r[0] == "k"}
    print("step moments (moment, step, took ms, tags, blocks, complete):",
          [(m[3], m[5], (int(ends[m[3]][1]) - int(m[1])) / 1e6, ends[m[3]][3], ends[m[3]][4], ends[m[3]][5])
           for m in moments if m[3] in ends])
    assert moments, "no step moment"
    first = moments[0][3]
    assert first in ends and ends[first][5] == "1", ends.get(first)
    tags = [r for r in lines if r[0] == "g" and r[1] == first]
    by_cat = {}
    for r in tags:
        by_cat[r[5]] = by_cat.get(r[5], 0) + int(r[4])
    want = {"parameter": data["parameter_bytes"], "gradient": data["gradient_bytes"],
            "optimizer_state": data["optimizer_state_bytes"]}
    print(f"{'category':16} {'memguard':>14} {'torch':>14}")
    for cat, n in want.items():
        print(f"{cat:16} {by_cat.get(cat, 0):14} {n:14}")
    assert {c: by_cat.get(c, 0) for c in want} == want, (by_cat, want)
    params = {int(r[3], 16) for r in tags if r[5] == "parameter"}
    assert params == set(data["parameter_ptrs"]), "parameter tags are not the parameters' storages"
    # The first step raised the GPU peak: PyTorch's allocator blocks are there, and every parameter
    # storage is an allocated block of it.
    blocks = {int(r[3], 16): r for r in lines if r[0] == "d" and r[1] == first}
    print(f"d records in the first step moment: {len(blocks)}")
    assert blocks, "no allocator blocks at the first step moment"
    missing = [hex(p) for p in params if p not in blocks or blocks[p][6] != "active_allocated"]
    assert not missing, f"parameters without an allocated block: {missing[:5]}"
    _reader_accepts(ctx, path)


def _check_oom(ctx, mode):
    env = {"MEMGUARD_ALLOCATOR": "memguard"} if mode == "allocator" else None
    data, path = _insight(ctx, "oom", mode, env=env)
    print(f"torch {data['torch']}, report {path.name}: OOM after {data['iterations']} iterations; "
          f"SavedTensor.data: {data['saved_tensor_data']}")
    assert "oom" in data, "the workload did not run out of memory"
    xs = records(path, {"x"})
    print("x records:", xs)
    source = "allocator" if mode == "allocator" else "torch"
    ours = [x for x in xs if x[4] == source]
    assert ours, f"no x record with source {source}"
    x = ours[0]
    assert int(x[6]) > 0, x  # rounded
    if mode == "native":
        assert int(x[7]) == data["limit"], (x[7], data["limit"])  # the observer's limit: the fraction's
        assert x[9] == str(data["total"]), (x[9], data["total"])
    else:
        assert x[5] != "-", x  # memguard's allocator knows the caller's bytes
    assert x[12] != "0" and x[13] != "0", "the x has no request stacks"
    moment = x[14]
    assert moment != "0", "the x is not in a moment"
    lines = records(path, {"h", "g", "d", "x", "k"})
    h = [i for i, r in enumerate(lines) if r[0] == "h" and r[3] == moment]
    assert h and lines[h[0]][4] == "oom", h
    end = next(i for i in range(h[0], len(lines)) if lines[i][0] == "k" and lines[i][2] == moment)
    inside = lines[h[0] + 1:end]
    assert [r[0] for r in inside][-1] == "x", [r[0] for r in inside][-3:]
    by_cat = {}
    for r in inside:
        if r[0] == "g":
            by_cat[r[5]] = by_cat.get(r[5], 0) + int(r[4])
    blocks = [r for r in inside if r[0] == "d"]
    print(f"OOM moment {moment}: took {(int(lines[end][1]) - int(lines[h[0]][1])) / 1e6:.1f} ms, "
          f"complete {lines[end][5]}, tags by category (MiB): "
          f"{ {c: round(n / 2**20, 1) for c, n in by_cat.items()} }, d records {len(blocks)}")
    assert by_cat.get("parameter", 0) == 4 * (4096 * 4096 + 4096) * 4, by_cat
    if mode == "native":
        assert blocks, "no allocator blocks at the OOM"
    else:
        assert not blocks, "d records in allocator mode"
    if data["saved_tensor_data"]:
        # The graphs that total_loss keeps hold the activations: most of the tagged bytes.
        assert by_cat.get("activation", 0) > 0.5 * sum(by_cat.values()), by_cat
    line = f"memguard: CUDA out of memory on device 0: memguard oom {path}"
    assert line in data["stderr"], data["stderr"][-2000:]
    _reader_accepts(ctx, path)


@check("insight-library", "OOM under a memory fraction (total_loss += loss): the observer's x in an OOM moment, the stderr line")
def insight_oom_native(ctx):
    _check_oom(ctx, "native")


@check("insight-library", "OOM in allocator mode (total_loss += loss): x source allocator in an OOM moment, the stderr line")
def insight_oom_allocator_mode(ctx):
    _check_oom(ctx, "allocator")
