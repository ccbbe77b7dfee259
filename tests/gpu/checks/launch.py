# memguard run, the pytest plugin and the CI gates on a real GPU. With acceptance.sh --wheel they
# are the installed wheel's (the venv's `memguard` console script, its Python package, its pytest11
# entry point); with a build tree, the build's CLI and python/ on PYTHONPATH. Exec'd by
# acceptance.py (check, workload, reports, Skip, ctx are its names).
import xml.etree.ElementTree as _ET

_REPO = HERE.parent.parent


def _memguard(ctx):
    """The command: the venv's console script (which execs the bundled CLI), or the build's CLI."""
    return [str(ctx.cli)]


def _python_env(ctx):
    """What a Python child needs to import the memguard package: nothing with the wheel installed;
    with a build tree, python/ on PYTHONPATH."""
    return {} if ctx.venv else {"PYTHONPATH": str(_REPO / "python")}


@check("launch", "the wheel's files: memguard --version and python -m memguard agree; memguard.lib_path() is the library the runs preload")
def installed_files(ctx):
    if not ctx.venv:
        raise Skip("a build tree: run acceptance.sh --wheel WHEEL for the installed wheel")
    script = ctx.run([str(ctx.cli), "--version"]).stdout.strip()
    module = ctx.run([ctx.python, "-m", "memguard", "--version"]).stdout.strip()
    print(f"  memguard --version: {script}\n  python -m memguard --version: {module}\n  lib_path(): {ctx.lib}")
    assert script == module and script.startswith("memguard "), (script, module)
    assert str(ctx.lib).startswith(str(ctx.venv)), ctx.lib
    for tool in ("gcc", "g++", "cmake"):
        print(f"  {tool} on this machine: {shutil.which(tool)} (not used: nothing is built with --wheel)")


@check("launch", "memguard run -- python train_small.py: report written and listed, the exit status passed through, python -m memguard run the same")
def run_training(ctx):
    env = dict(_python_env(ctx))
    for tag, launcher in (("script", _memguard(ctx)), ("module", [ctx.python, "-m", "memguard"])):
        if tag == "module" and not ctx.venv:
            env["PYTHONPATH"] = str(_REPO / "python")
            launcher = [str(ctx.cli)]  # a source checkout's package has no bundled CLI to exec
        result = ctx.out / f"launch_{tag}.json"
        out = ctx.out / f"launch_{tag}.%p.mgr"
        p = ctx.run([*launcher, "run", "--output", str(out), "--", ctx.python,
                     str(HERE / "workloads" / "train_small.py"), str(result), "--steps", "3"], env=env)
        files = reports(ctx, f"launch_{tag}.")
        print(f"  {' '.join(launcher[-2:])} run: exit {p.returncode}, {len(files)} report(s); its last lines:")
        print("    " + "\n    ".join(p.stderr.strip().splitlines()[-3:]))
        assert len(files) == 1 and str(files[0]) in p.stderr, (files, p.stderr[-1500:])
        assert json.loads(result.read_text())["losses"], "the training ran"
    # The child's own status comes back (3), and 128+N for a signal.
    p = ctx.run([*_memguard(ctx), "run", "--", ctx.python, "-c", "import torch, sys; torch.zeros(1, device='cuda'); sys.exit(3)"],
                env={"MEMGUARD_OUTPUT": str(ctx.out / "launch_status.%p.mgr")}, check=False)
    print(f"  child exiting 3: memguard run exits {p.returncode}")
    assert p.returncode == 3, p.stderr[-2000:]
    p = ctx.run([*_memguard(ctx), "run", "--", ctx.python, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
                check=False)
    print(f"  child killed by SIGTERM: memguard run exits {p.returncode}")
    assert p.returncode == 128 + 15, p.stderr[-2000:]


def _pytest(ctx, tag, extra_env):
    xml = ctx.out / f"pytest_{tag}.xml"
    args = [ctx.python, "-m", "pytest", "--memguard", "-p", "no:cacheprovider", "-v", f"--junitxml={xml}",
            str(HERE / "pytest_cuda_cases.py")]
    if not ctx.venv:
        args[3:3] = ["-p", "memguard.pytest_plugin", "--memguard-library", str(ctx.lib)]
    env = dict(_python_env(ctx), MEMGUARD_OUTPUT=str(ctx.out / f"pytest_{tag}.%p.mgr"), **extra_env)
    p = ctx.run(args, env=env, check=False, timeout=580)
    outcomes, messages = {}, {}
    if xml.exists():
        for case in _ET.parse(xml).getroot().iter("testcase"):
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            outcomes[case.get("name")] = "failed" if bad is not None else "passed"
            if bad is not None:
                messages[case.get("name")] = (bad.get("message") or "") + "\n" + (bad.text or "")
    print(f"  pytest --memguard ({tag}): exit {p.returncode}, outcomes {outcomes}")
    for name, text in messages.items():
        lines = [l for l in text.splitlines() if "memguard" in l or "#" in l][:8]
        print(f"  {name}:\n    " + "\n    ".join(lines))
    print("    " + "\n    ".join(p.stdout.strip().splitlines()[-16:]))
    assert p.returncode == 1, f"exit {p.returncode}\n{p.stderr[-2000:]}"
    assert len(outcomes) == 7, outcomes
    wrong = {n: o for n, o in outcomes.items() if o != ("failed" if n.endswith("_fails") else "passed")}
    assert not wrong, wrong
    assert "Tests by incremental CUDA memory peak" in p.stdout, "no session summary"
    for name in ("test_memory_fails", "test_leaks_fails"):
        assert "pytest_cuda_cases.py:" in messages.get(name, ""), f"{name}: no site in this file named"


@check("launch", "pytest --memguard on CUDA tensors, PyTorch's allocator: each marker passes and fails where it should")
def pytest_native(ctx):
    _pytest(ctx, "native", {})


@check("launch", "pytest --memguard on CUDA tensors, allocator mode: each marker passes and fails where it should")
def pytest_allocator_mode(ctx):
    _pytest(ctx, "memguard", {"MEMGUARD_ALLOCATOR": "memguard"})


@check("launch", "memguard check and diff --fail-if on a real training report: pass within the limits, FAIL past them")
def gates_on_training(ctx):
    files = reports(ctx, "launch_script.")
    if not files:
        raise Skip("no report of run_training")
    report = str(files[0])
    summary = json.loads(ctx.run([str(ctx.cli), "summary", "--json", report]).stdout)
    peak = summary["peak_bytes"]
    ok = ctx.run([str(ctx.cli), "check", report, "--max-peak", str(peak), "--no-hazards", "--no-oom"], check=False)
    bad = ctx.run([str(ctx.cli), "check", report, "--max-peak", str(peak - 1)], check=False)
    print(f"  peak {peak} B\n  {ok.stdout.strip()}\n  " + "\n  ".join(bad.stdout.strip().splitlines()[:4]))
    assert ok.returncode == 0 and bad.returncode == 1 and "FAIL peak" in bad.stdout
    other = reports(ctx, "launch_module.")
    if other:
        d = ctx.run([str(ctx.cli), "diff", report, str(other[0]), "--fail-if", "peak>+5%", "--fail-if", "oom>0"],
                    check=False)
        print("  diff --fail-if: exit", d.returncode, "\n  " + "\n  ".join(d.stdout.strip().splitlines()[-3:]))
        assert d.returncode == 0, d.stdout[-2000:]
