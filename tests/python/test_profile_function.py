"""9. memguard's profile function exists only while a mark is pending, and never replaces a user's.

memguard installs its C profile function with no object, so sys.getprofile() returns None both
without it and with it; the children read the thread's C-level profile function directly
(childlib.profile_owner(): tstate->c_profilefunc, located by calibration, compared with
libmemguard.so's mapping).

  nomark    after compiles were collected no profile function is installed (checked after calls,
            inside a warm compiled call at its graph break, after a second compile), while in the
            end-of-compile callback (a mark just set) memguard's is (the probe's positive control).
  user      a profiler set with sys.setprofile before compiling stays in place through compiles and
            calls and keeps receiving events; memguard then leaves the garbage to the automatic
            collector (no memguard collection; its info line is logged; the garbage outlives the
            call); once the user removes the profiler, the next compile's collection also takes
            the earlier marks and frees their garbage.
  replaced  a user profiler installed while a mark is pending replaces memguard's function; a
            compile under it does not take it back; after the user removes it, the next compile
            reinstalls memguard's function and everything pending is collected.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

INFO_LINE = "a profiler is active on this thread; compile garbage is left to the automatic collector"


def child(arm):
    import threading

    import torch

    import childlib

    childlib.no_automatic_full_collections()
    ends = childlib.EndCallbacks()
    state = {"raise": False}
    backend = childlib.LeakyBackend(1 << 16, raise_on_run=lambda: state["raise"])
    seen = {}

    @torch._dynamo.disable
    def at_graph_break(tag):
        seen[tag] = childlib.profile_owner()

    def f(x):
        y = torch.sin(x) + 1
        at_graph_break("f")
        return y * 2

    def g(x):
        return torch.cos(x) * 3

    def h(x):
        return torch.tanh(x) - 1

    cf, cg, ch = (torch.compile(fn, backend=backend) for fn in (f, g, h))
    x = torch.randn(16)
    out = {"tid": threading.get_native_id()}
    events = []

    def user_profiler(frame, event, arg):
        events.append(event)

    kind = arm["kind"]
    if kind == "nomark":
        cf(x)
        out["after_first_call"] = childlib.profile_owner()
        out["getprofile_after_first_call"] = repr(sys.getprofile())
        cf(x)  # warm: no compile; at_graph_break records the owner mid-call
        out["mid_warm_call"] = seen["f"]
        out["after_warm_call"] = childlib.profile_owner()
        cg(x)
        out["after_second_compile"] = childlib.profile_owner()
    elif kind == "user":
        sys.setprofile(user_profiler)
        cf(x)
        n = len(events)
        cf(x)
        out["user_events_grew"] = len(events) > n > 0
        out["getprofile_is_user"] = sys.getprofile() is user_profiler
        out["owner_with_user"] = childlib.profile_owner()
        out["alive_with_user"] = backend.alive()
        out["compiled_with_user"] = len(backend.leaked)
        sys.setprofile(None)
        cg(x)
        out["alive_after_removal_and_compile"] = backend.alive()
        out["owner_end"] = childlib.profile_owner()
    elif kind == "replaced":
        state["raise"] = True
        try:
            cf(x)  # compiles, then raises inside the compiled region: the mark stays pending
        except RuntimeError:
            # first statement, before any normal Python return (memguard's safe point): the
            # user's profiler replaces memguard's while the mark is pending
            sys.setprofile(user_profiler)
        state["raise"] = False
        out["owner_with_user"] = childlib.profile_owner()
        out["alive_when_replaced"] = backend.alive()
        ch(x)  # a compile while the user's profiler is active
        out["getprofile_is_user_after_compile"] = sys.getprofile() is user_profiler
        out["alive_with_user"] = backend.alive()
        out["compiled_with_user"] = len(backend.leaked)
        sys.setprofile(None)
        cg(x)
        out["alive_end"] = backend.alive()
        out["owner_end"] = childlib.profile_owner()
    out["compiled"] = [cid for cid, _ in backend.leaked]
    out["ends"] = ends.events
    return out


class ProfileFunction(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        on = {"MEMGUARD_COLLECT_COMPILE_GARBAGE": None, "MEMGUARD_LOG_LEVEL": "info"}
        cls.runs = {k: harness.run_child(__file__, {"kind": k}, env=on) for k in ("nomark", "user", "replaced")}

    def test_no_profile_function_without_a_pending_mark(self):
        run = self.runs["nomark"]
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["ends"])
        for e in r["ends"]:
            self.assertEqual(e["profile"], "memguard", f"positive control: a mark just set installs it: {e}")
        self.assertEqual(r["getprofile_after_first_call"], "None")
        for key in ("after_first_call", "mid_warm_call", "after_warm_call", "after_second_compile"):
            self.assertEqual(r[key], "none", f"{key}: no profile function expected\n" + run.describe())
        self.assertEqual(len(run.need_report().memguard_Y()), 2)

    def test_user_profiler_is_never_replaced(self):
        run = self.runs["user"]
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["getprofile_is_user"], "sys.getprofile() is still the user's profiler")
        self.assertEqual(r["owner_with_user"], "other")
        self.assertTrue(r["user_events_grew"], "the user's profiler keeps receiving events")
        for e in r["ends"][:-1]:
            self.assertEqual(e["profile"], "other", f"memguard did not install over the user's: {e}")
        self.assertIn(INFO_LINE, run.stderr, "the info line tells the garbage is left to the automatic collector")
        self.assertGreater(r["compiled_with_user"], 0)
        self.assertEqual(r["alive_with_user"], r["compiled_with_user"],
                         "garbage left to the automatic collector while profiling")

    def test_collection_resumes_after_user_profiler(self):
        run = self.runs["user"]
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["alive_after_removal_and_compile"], 0)
        self.assertEqual(r["owner_end"], "none")
        mg = run.need_report().memguard_Y()
        self.assertEqual(len(mg), 1, mg)
        self.assertEqual(sorted(mg[0]["compile_ids"]), sorted(r["compiled"]), "both marks collected together")

    def test_user_profiler_replacing_ours_while_pending(self):
        run = self.runs["replaced"]
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["ends"][0]["profile"], "memguard", "the first compile installed memguard's")
        self.assertEqual(r["owner_with_user"], "other")
        self.assertEqual(r["alive_when_replaced"], 1, "the first compile's garbage was pending when replaced")
        self.assertTrue(r["getprofile_is_user_after_compile"], "a compile does not take the profiler back")
        self.assertEqual(r["alive_with_user"], r["compiled_with_user"])
        self.assertEqual(r["alive_end"], 0, "everything pending collected once the user's profiler is gone\n"
                         + run.describe())
        self.assertEqual(r["owner_end"], "none")
        mg = run.need_report().memguard_Y()
        self.assertEqual(len(mg), 1, mg)
        self.assertEqual(sorted(mg[0]["compile_ids"]), sorted(r["compiled"]))


if __name__ == "__main__":
    harness.main(child)
