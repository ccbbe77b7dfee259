# Issue 20 on a real GPU, end to end through the CLI: an OOM explained (`memguard oom`), exact
# categories at a step's peak, growth over steps (`memguard steps`), stale gradients of tensors that
# are not parameters; in interposition mode and in allocator mode. The workloads are
# workloads/insight.py. Exec'd by acceptance.py (check, workload, reports, Skip, ctx are its names).

_IX_MODES = (("interposition", {}), ("allocator", {"MEMGUARD_ALLOCATOR": "memguard"}))


def _ix_run(ctx, scenario, mode, env, steps=6, check_exit=True):
    """Runs one scenario preloaded; returns (result JSON, report path, stderr)."""
    def go():
        tag = f"insight_{scenario}_{mode}"
        result = ctx.out / f"{tag}.json"
        full_env = {"MEMGUARD_OUTPUT": str(ctx.out / f"{tag}.%p.mgr"), **env}
        p = ctx.run([ctx.python, str(HERE / "workloads" / "insight.py"), str(result), scenario, "--steps", str(steps)],
                    env=full_env, preload=True, check=check_exit)
        files = reports(ctx, tag + ".")
        assert len(files) == 1, (files, p.stderr[-3000:])
        return json.loads(result.read_text()), files[0], p.stderr
    return ctx.once(("insight", scenario, mode), go)


def _ix_json(ctx, *args):
    p = ctx.run([str(ctx.cli), *args, "--json"])
    return json.loads(p.stdout)


def _ix_text(ctx, *args):
    p = ctx.run([str(ctx.cli), *args], check=False)
    print(f"  $ memguard {' '.join(args[:1])} ... (exit {p.returncode})")
    print("    " + "\n    ".join((p.stdout or p.stderr).rstrip().splitlines()[:40]))
    return p


def _ix_file_of(label):
    # "fn at /path/file.py:41 via ..." -> "/path/file.py"
    at = label.split(" at ", 1)[1] if " at " in label else ""
    return at.split(":", 1)[0]


def _ix_line_of(label):
    at = label.split(" at ", 1)[1] if " at " in label else ""
    rest = at.split(":", 1)[1] if ":" in at else ""
    digits = "".join(ch for ch in rest if ch.isdigit() or ch == " ").split()
    return int(digits[0]) if digits else -1


for _mode, _env in _IX_MODES:
    @check("insight", f"{_mode}: the summed-losses bug runs out of memory; memguard oom names activations held by autograd graphs and the user's line")
    def oom_explained(ctx, _mode=_mode, _env=_env):
        result, path, stderr = _ix_run(ctx, "oom", _mode, _env)
        print(f"  workload: OOM after {result['iterations']} iterations: {result['message']}")
        assert result["oom"], "the workload did not run out of memory"
        pointer = [l for l in stderr.splitlines() if "memguard oom" in l]
        print(f"  stderr pointer: {pointer[:2]}")
        assert pointer and str(path) in pointer[0], stderr[-2000:]
        _ix_text(ctx, "oom", str(path))
        data = _ix_json(ctx, "oom", str(path))
        ooms = data["ooms"]
        assert ooms, data
        oom = ooms[-1]
        want = "torch" if _mode == "interposition" else "allocator"
        print(f"  OOMs: {len(ooms)} (sources {[o['source'] for o in ooms]}); the last: site {oom['site']!r}")
        print(f"  verdict: {' '.join(oom['verdict'])}")
        assert oom["source"] == want, oom["source"]
        cats = {c["category"]: c for c in oom["categories"]}
        total = sum(c["bytes"] for c in oom["categories"])
        act = cats.get("activation", {"bytes": 0})
        print(f"  categories: " + ", ".join(f"{c['category']} {c['bytes'] / 2**20:.0f} MiB" for c in oom["categories"]))
        assert act["bytes"] >= 0.5 * total, "activations are not the largest part"
        assert oom["categories"][0]["category"] == "activation", oom["categories"][0]
        sites = act.get("sites", [])
        assert sites and _ix_file_of(sites[0]["label"]) == result["file"], sites
        assert "activation" in " ".join(oom["verdict"]), oom["verdict"]
        kept = [s["label"] for s in oom.get("saved_for_backward", [])]
        print(f"  saved for backward: {kept[:3]}")
        assert any("total_loss" in k for k in kept), kept

    @check("insight", f"{_mode}: a transformer with AdamW: parameters, gradients and optimizer state at the step peak equal the real tensors' bytes")
    def exact_categories(ctx, _mode=_mode, _env=_env):
        result, path, _ = _ix_run(ctx, "train", _mode, _env)
        steps = _ix_json(ctx, "steps", str(path))["steps"]
        print(f"  steps in the report: {len(steps)} (the workload ran 6)")
        assert len(steps) == 6 and all(s["source"] == "optimizer" and s["name"] == "AdamW" for s in steps), steps
        last = steps[-1]
        top = _ix_json(ctx, "top", str(path), "--by", "category", "--at", repr(last["peak_t"]))
        got = {c["category"]: c["bytes"] for c in top["categories"]}
        _ix_text(ctx, "top", str(path), "--by", "category", "--at", repr(last["peak_t"]))
        for cat in ("parameters", "gradients", "optimizer_state"):
            want, count = result[cat]
            have = got.get(cat.rstrip("s") if cat != "optimizer_state" else cat, 0)
            slack = 512 * count  # a tensor counts its request rounded up to 512 B, as PyTorch rounds it
            print(f"  {cat}: report {have} B, tensors {want} B in {count} storages (slack {slack} B)")
            assert want <= have <= want + slack, (cat, have, want)

    @check("insight", f"{_mode}: a cycle leaked per step: memguard steps finds the growth and the user's line")
    def growth(ctx, _mode=_mode, _env=_env):
        result, path, _ = _ix_run(ctx, "leak", _mode, _env, steps=12)
        _ix_text(ctx, "steps", str(path))
        g = _ix_json(ctx, "steps", str(path))["growth"]
        assert g, "no growth found"
        per = g["per_step_bytes"]
        print(f"  growth: {per / 2**20:.1f} MiB a step over steps {g['first_step']}-{g['last_step']}; sites {[s['label'] for s in g['sites'][:2]]}")
        assert 0.9 * result["bytes_per_step"] <= per <= 1.35 * result["bytes_per_step"], per
        site = g["sites"][0]["label"]
        assert _ix_file_of(site) == result["file"] and _ix_line_of(site) == result["lines"]["leak"], (site, result["lines"])

    @check("insight", f"{_mode}: a leaf that is not a parameter keeps its .grad: gradients of non-parameters")
    def stale_grad(ctx, _mode=_mode, _env=_env):
        result, path, _ = _ix_run(ctx, "stale_grad", _mode, _env)
        steps = _ix_json(ctx, "steps", str(path))["steps"]
        assert steps, "no steps"
        top = _ix_json(ctx, "top", str(path), "--by", "category", "--at", repr(steps[-1]["peak_t"]))
        got = {c["category"]: c["bytes"] for c in top["categories"]}
        want, _ = result["stale_grad"]
        print(f"  nonparam_gradient: report {got.get('nonparam_gradient', 0)} B, the leaf's .grad {want} B")
        assert got.get("nonparam_gradient", 0) >= want, got
