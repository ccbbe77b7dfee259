# The compile-garbage collector's window: its effect with inductor on CUDA (bench/compile_window_inductor.py).


@check("compile-window", "benchmark: compile window with inductor on CUDA, first compile vs later (window vs full collection)")
def compile_window_inductor(ctx):
    bench = HERE.parent.parent / "bench" / "compile_window_inductor.py"
    p = ctx.run([ctx.python, str(bench), "--lib", str(ctx.lib), "--reps", "2", "--compiles", "5", "--device", "cuda",
                 "--json", str(ctx.out / "compile_window_inductor.json")], timeout=580)
    print(p.stdout)
    summary = json.loads((ctx.out / "compile_window_inductor.json").read_text())["summary"]
    assert summary["window"]["later_ms"] < summary["full"]["later_ms"], summary
