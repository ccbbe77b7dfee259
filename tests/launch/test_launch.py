"""`memguard run`, `memguard env` and `memguard merge` without files, end to end: programs that
allocate through memguard's fake CUDA runtime (launch_child.py, tests/apps) run under the CLI.

CTest runs one test per case (launch.<name>) with, in the environment:
  MGTEST_CLI          build/bin/memguard
  MGTEST_LIB          build/lib/libmemguard.so
  MGTEST_FAKE_CUDART  the fake libcudart.so.13
  MGTEST_APP_EXIT_CODE, MGTEST_APP_NOOP   tests/apps programs linked against the fake runtime
  MGTEST_KEEP=1       keep the working directories (printed)
Run by hand: python3 test_launch.py [LaunchTest.test_name ...]
"""
import glob
import io
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "launch_child.py")


def need(name):
    p = os.environ.get(name)
    if not p or not os.path.exists(p):
        raise RuntimeError(f"{name} must name an existing file (see the docstring)")
    return os.path.abspath(p)


def header(path):
    """The I records of a report's header, decoded."""
    info = {}
    with open(path, "rb") as f:
        binary = f.read(23) == b"MEMGUARD-REPORT-BINARY "
    if binary:  # the library's default encoding: its text through the CLI
        text = subprocess.run([need("MGTEST_CLI"), "export", "--text", path, "-o", "-"], capture_output=True,
                              text=True, check=True).stdout
    else:
        with open(path) as f:
            text = f.read()
    with io.StringIO(text) as f:
        assert f.readline().startswith("MEMGUARD-REPORT "), path
        for line in f:
            w = line.rstrip("\n").split(" ")
            if w[0] != "I":
                break
            info[w[1]] = "" if w[2] == "%" else urllib.parse.unquote(w[2])
    return info


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.cli = need("MGTEST_CLI")
        self.lib = os.path.realpath(need("MGTEST_LIB"))
        self.fake = need("MGTEST_FAKE_CUDART")
        self.dir = tempfile.mkdtemp(prefix="mgtest-launch.")
        self.tmp = tempfile.mkdtemp(prefix="mgtest-launch-tmp.")

    def tearDown(self):
        if os.environ.get("MGTEST_KEEP") == "1":
            print(f"kept {self.dir}")
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")
               and not k.startswith("MEMGUARD_")}
        env["MGTEST_FAKE_CUDART"] = self.fake
        env["TMPDIR"] = self.tmp  # memguard run's private directory goes here: checked for leftovers
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra)
        return env

    def run_cli(self, args, env=None, timeout=60, cwd=None):
        return subprocess.run([self.cli] + args, cwd=cwd or self.dir, env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout)

    def py(self, *args):
        return [sys.executable, CHILD] + [str(a) for a in args]

    def listed(self, stderr):
        """The reports memguard run listed (one, or several after 'N reports (run ID):')."""
        one = re.search(r"^memguard: report: (.*)$", stderr, re.M)
        if one:
            return [one.group(1)]
        many = re.search(r"^memguard: (\d+) reports \(run (\S+)\):\n((?:  .*\n)+)", stderr, re.M)
        if not many:
            return []
        files = [l[2:] for l in many.group(3).splitlines()]
        self.assertEqual(len(files), int(many.group(1)))
        return files

    def reports(self, pattern="*.mgr"):
        return sorted(glob.glob(os.path.join(self.dir, pattern)))

    def assert_run_dir_removed(self):
        self.assertEqual(os.listdir(self.tmp), [], "memguard run left its temporary directory")

    # --- run: the report, the list, the status ----------------------------------------------------

    def test_report_listed_and_status_passed_on(self):
        r = self.run_cli(["run", need("MGTEST_APP_EXIT_CODE")])
        self.assertEqual(r.returncode, 7, r.stderr)  # app_exit_code's own status
        files = self.listed(r.stderr)
        self.assertEqual(len(files), 1, r.stderr)
        self.assertEqual(self.reports(), [os.path.join(self.dir, files[0])])
        self.assertRegex(files[0], r"^memguard\.app_exit_code\.\d+\.mgr$")  # no rank: the name of today
        self.assertIn(f"memguard: read it: memguard top {files[0]}\n", r.stderr)
        info = header(self.reports()[0])
        self.assertRegex(info["run_id"], r"^\d{8}-\d{6}-[0-9a-f]{8}$")
        self.assertGreaterEqual(int(info["format_minor"]), 7)  # the run id came with minor 7
        self.assert_run_dir_removed()
        # The listed command reads it.
        top = self.run_cli(["top", files[0]])
        self.assertEqual(top.returncode, 0, top.stderr)

    def test_python_exit_status(self):
        r = self.run_cli(["run", "--"] + self.py("alloc_exit", 3))
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(len(self.listed(r.stderr)), 1, r.stderr)

    def test_signal_death_is_128_plus_n(self):
        r = self.run_cli(["run"] + self.py("alloc_signal", int(signal.SIGTERM)))
        self.assertEqual(r.returncode, 128 + signal.SIGTERM, r.stderr)
        self.assertEqual(len(self.listed(r.stderr)), 1, r.stderr)  # the header was written at creation
        r = self.run_cli(["run"] + self.py("alloc_signal", int(signal.SIGABRT)))
        self.assertEqual(r.returncode, 128 + signal.SIGABRT, r.stderr)

    def test_no_report_says_so(self):
        r = self.run_cli(["run", need("MGTEST_APP_NOOP")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("memguard: no report was written (no process of the command allocated CUDA memory)\n",
                      r.stderr)
        self.assertEqual(self.reports(), [])
        self.assert_run_dir_removed()

    def test_command_not_found(self):
        r = self.run_cli(["run", "memguard-no-such-command"])
        self.assertEqual(r.returncode, 127)
        self.assertEqual(r.stderr, "memguard: error: cannot run 'memguard-no-such-command': No such file or "
                                   "directory\n")
        r = self.run_cli(["run", self.tmp])  # a directory: found but not runnable
        self.assertEqual(r.returncode, 126, r.stderr)

    # --- run: signals -------------------------------------------------------------------------------

    def start_waiting(self, extra_env=None):
        p = subprocess.Popen([self.cli, "run"] + self.py("wait_signals"), cwd=self.dir,
                             env=self.env(**(extra_env or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        line = p.stdout.readline()
        self.assertEqual(line, "ready\n")
        return p

    def test_sigterm_and_sigint_reach_the_child_once(self):
        for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
            p = self.start_waiting()
            p.send_signal(sig)  # to memguard alone, as kill PID or a scheduler sends it
            out, err = p.communicate(timeout=30)
            self.assertEqual(out, f"signals {name}\n", err)
            self.assertEqual(p.returncode, 41, err)  # the child's status: 40 + one signal
            self.assertEqual(len(self.listed(err)), 1, err)

    def test_terminal_ctrl_c_is_not_forwarded_twice(self):
        # memguard run in the foreground of a terminal: Ctrl-C sends SIGINT to the whole
        # foreground process group, memguard and the child; the child must get it once. (Had
        # memguard forwarded it, the two could still merge when the second comes before the first
        # is taken: a few tries make that unlikely; a correct memguard passes every time.)
        for _ in range(4):
            pid, fd = pty.fork()
            if pid == 0:
                os.chdir(self.dir)
                os.execve(self.cli, [self.cli, "run"] + self.py("wait_signals"), self.env())
            out = b""
            deadline = time.monotonic() + 30
            while b"ready" not in out and time.monotonic() < deadline:
                if select.select([fd], [], [], 1)[0]:
                    out += os.read(fd, 4096)
            self.assertIn(b"ready", out)
            os.write(fd, b"\x03")
            while True:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            text = out.decode(errors="replace")
            self.assertIn("signals SIGINT\r\n", text)
            self.assertEqual(os.waitstatus_to_exitcode(status), 41, text)

    # --- run: the environment -------------------------------------------------------------------------

    def child_env(self, args, **extra):
        r = self.run_cli(["run"] + args + self.py("env"), env=self.env(**extra))
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_ld_preload_prepended_once(self):
        self.assertEqual(self.child_env([])["LD_PRELOAD"], self.lib)
        env = self.child_env([], LD_PRELOAD=self.fake)
        self.assertEqual(env["LD_PRELOAD"], f"{self.lib}:{self.fake}")
        # Already there (by another path to the same file): left as it is.
        link = os.path.join(self.tmp, "link.so")
        os.symlink(self.lib, link)
        self.assertEqual(self.child_env([], LD_PRELOAD=f"{self.fake} {link}")["LD_PRELOAD"], f"{self.fake} {link}")
        # --library names another copy.
        copy = os.path.join(self.tmp, "libmemguard-copy.so")
        shutil.copy(self.lib, copy)
        self.assertEqual(self.child_env(["--library", copy])["LD_PRELOAD"], copy)

    def test_options_set_the_variables_and_override_them(self):
        env = self.child_env(["--stack-depth", "3", "--no-compile-gc", "--no-python-stacks", "--no-nvtx",
                              "--allocator=memguard", "--log-level", "error", "--output", "x.%p.mgr"],
                             MEMGUARD_STACK_DEPTH="9", MEMGUARD_NVTX="1", MEMGUARD_COMPILE_WINDOW="0")
        self.assertEqual(env["MEMGUARD_STACK_DEPTH"], "3")
        self.assertEqual(env["MEMGUARD_COLLECT_COMPILE_GARBAGE"], "0")
        self.assertEqual(env["MEMGUARD_PYTHON_STACKS"], "0")
        self.assertEqual(env["MEMGUARD_NVTX"], "0")
        self.assertEqual(env["MEMGUARD_ALLOCATOR"], "memguard")
        self.assertEqual(env["MEMGUARD_LOG_LEVEL"], "error")
        self.assertEqual(env["MEMGUARD_OUTPUT"], "x.%p.mgr")
        self.assertEqual(env["MEMGUARD_COMPILE_WINDOW"], "0")  # inherited
        self.assertTrue(os.path.isabs(env["MEMGUARD_RUN_MANIFEST"]))
        # A bounded report's follower runs this memguard, unless the variable names another.
        self.assertEqual(env["MEMGUARD_CLI"], os.path.realpath(self.cli))
        self.assertEqual(self.child_env([], MEMGUARD_CLI="/opt/mg/memguard")["MEMGUARD_CLI"], "/opt/mg/memguard")
        self.assertEqual(self.child_env(["--no-fold"])["MEMGUARD_FOLD"], "0")
        self.assertEqual(self.child_env([], MEMGUARD_RUN_ID="mine")["MEMGUARD_RUN_ID"], "mine")
        self.assertEqual(self.child_env(["--run-id", "given"], MEMGUARD_RUN_ID="mine")["MEMGUARD_RUN_ID"], "given")

    def test_options_reach_the_library(self):
        r = self.run_cli(["run", "--output", "out.%r.%p.custom", "--stack-depth", "0", "--run-id", "job-17"]
                         + self.py("alloc_exit", 0))
        self.assertEqual(r.returncode, 0, r.stderr)
        files = self.listed(r.stderr)
        self.assertEqual(len(files), 1, r.stderr)
        self.assertRegex(files[0], r"^out\.0\.\d+\.custom$")
        info = header(os.path.join(self.dir, files[0]))
        self.assertEqual(info["stack_depth"], "0")
        self.assertEqual(info["run_id"], "job-17")

    def test_bad_values_are_refused_before_running(self):
        marker = os.path.join(self.dir, "ran")
        cmd = ["sh", "-c", f"touch {marker}"]
        cases = [
            (["--stack-depth", "x"], "memguard: error: --stack-depth: MEMGUARD_STACK_DEPTH='x' is not valid: "
                                     "expected an integer from 0 to 256\n"),
            (["--allocator", "cuda"], "memguard: error: --allocator: MEMGUARD_ALLOCATOR='cuda' is not valid: "
                                      "expected native (PyTorch's allocator) or memguard\n"),
            (["--report-encoding", "xml"], "memguard: error: --report-encoding: MEMGUARD_REPORT_ENCODING='xml' is "
                                           "not valid: expected binary (compact records) or text (a line per "
                                           "record)\n"),
            (["--max-report-size", "10KiB"], "memguard: error: --max-report-size: MEMGUARD_MAX_REPORT_SIZE='10KiB' "
                                             "is not valid: below the smallest limit, 1MiB (expected a size such as "
                                             "2GiB, or 0 for none)\n"),
            (["--output", "a%q"], "memguard: error: --output: MEMGUARD_OUTPUT='a%q' is not valid: '%' must be "
                                  "followed by p (pid), h (host), r (rank) or %\n"),
            (["--log-level", "loud"], "memguard: error: --log-level: MEMGUARD_LOG_LEVEL='loud' is not valid: "
                                      "expected trace, debug, info, warn, error, critical or off\n"),
            (["--run-id", "a b"], "memguard: error: --run-id: MEMGUARD_RUN_ID='a b' is not valid: expected 1 to "
                                  "128 printable ASCII characters without spaces\n"),
            (["--no-nvtx=1"], "memguard: error: option '--no-nvtx' takes no value\n"),
            (["--frobnicate"], "memguard: error: unknown option '--frobnicate' for 'run'\n"),
        ]
        for opts, first_line in cases:
            r = self.run_cli(["run"] + opts + cmd)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(r.stderr.startswith(first_line), r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 2, r.stderr)  # the error and the usage line
            self.assertFalse(os.path.exists(marker), opts)
        r = self.run_cli(["run", "--library", os.path.join(self.tmp, "nope.so")] + cmd)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, f"memguard: error: cannot use the memguard library "
                                   f"'{self.tmp}/nope.so': No such file or directory\n")
        r = self.run_cli(["run"])
        self.assertEqual((r.returncode, r.stderr.splitlines()[0]), (2, "memguard: error: 'run' needs a command "
                                                                        "to run"))
        self.assertFalse(os.path.exists(marker))

    def test_default_library_is_found_next_to_the_program(self):
        # A copy of the layout: bin/memguard and lib/libmemguard.so; without lib/, one clear error.
        root = os.path.join(self.tmp, "prefix")
        os.makedirs(os.path.join(root, "bin"))
        shutil.copy(self.cli, os.path.join(root, "bin", "memguard"))
        cli = os.path.join(root, "bin", "memguard")
        r = subprocess.run([cli, "env", "--json"], env=self.env(), capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, f"memguard: error: cannot use the memguard library '{root}/bin/../lib/"
                                   f"libmemguard.so': No such file or directory (it is looked for in ../lib next "
                                   f"to the memguard program; give --library PATH)\n")
        os.makedirs(os.path.join(root, "lib"))
        shutil.copy(self.lib, os.path.join(root, "lib", "libmemguard.so"))
        r = subprocess.run([cli, "env", "--json"], env=self.env(), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["LD_PRELOAD"], os.path.join(root, "lib", "libmemguard.so"))

    # --- ranks, merge ---------------------------------------------------------------------------------

    def test_ranks_of_a_fake_launcher_and_merge_without_files(self):
        # An earlier run in the same directory: merge picks the most recent one.
        first = self.run_cli(["run"] + self.py("alloc_exit", 0))
        self.assertEqual(first.returncode, 0, first.stderr)
        first_id = header(self.reports()[0])["run_id"]
        time.sleep(0.05)
        r = self.run_cli(["run"] + self.py("ranks", 3))
        self.assertEqual(r.returncode, 0, r.stderr)
        files = self.listed(r.stderr)
        self.assertEqual(len(files), 3, r.stderr)
        ranks = sorted(re.match(r"memguard\.[^/]+\.rank(\d)\.\d+\.mgr$", f).group(1) for f in files)
        self.assertEqual(ranks, ["0", "1", "2"], files)
        ids = {header(os.path.join(self.dir, f))["run_id"] for f in files}
        self.assertEqual(len(ids), 1)
        run_id = ids.pop()
        self.assertNotEqual(run_id, first_id)
        self.assertIn(f"memguard: 3 reports (run {run_id}):\n", r.stderr)
        self.assertIn(f"memguard: read them: memguard merge --run {run_id}\n", r.stderr)

        m = self.run_cli(["merge"])
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertTrue(m.stdout.startswith(f"run {run_id}: 3 reports in .\n"), m.stdout)
        rows = [l.split()[0] for l in m.stdout.splitlines()[3:6]]
        self.assertEqual(rows, ["0", "1", "2"], m.stdout)
        # The same from elsewhere, by directory; --json says the run.
        j = self.run_cli(["merge", self.dir, "--json"], cwd=self.tmp)
        self.assertEqual(j.returncode, 0, j.stderr)
        doc = json.loads(j.stdout)
        self.assertEqual(doc["run_id"], run_id)
        self.assertEqual([x["rank"] for x in doc["ranks"]], ["0", "1", "2"])
        # --run picks the earlier run.
        e = self.run_cli(["merge", "--run", first_id, "--json"])
        self.assertEqual(e.returncode, 0, e.stderr)
        self.assertEqual(len(json.loads(e.stdout)["ranks"]), 1)
        e = self.run_cli(["merge", "--run", "nosuchrun"])
        self.assertEqual((e.returncode, e.stderr), (2, "memguard: error: no report of run 'nosuchrun' in '.'\n"))
        # Files and --template work as before.
        exe = re.match(r"memguard\.(.+)\.rank0\.", sorted(files)[0]).group(1)
        t = self.run_cli(["merge", "--template", f"memguard.{exe}.rank%r.%p.mgr"])
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertTrue(t.stdout.startswith("3 reports\n"), t.stdout)

    # --- rank summaries, outlier ranks, the fleet export (docs/rank-summary.md, fleet-export.md) -------

    def run_ranks_mib(self, sizes):
        r = self.run_cli(["run"] + self.py("ranks_mib", ",".join(str(m) for m in sizes)))
        self.assertEqual(r.returncode, 0, r.stderr)
        files = [os.path.join(self.dir, f) for f in self.listed(r.stderr)]
        self.assertEqual(len(files), len(sizes), r.stderr)
        return r, sorted(files, key=lambda f: int(header(f)["rank"]))

    def test_run_writes_rank_summaries_and_merge_finds_the_outlier(self):
        sizes = [96, 96, 96, 1536, 96, 96]
        r, files = self.run_ranks_mib(sizes)
        self.assertIn(f"memguard: {len(sizes)} rank summaries beside the reports (REPORT.summary.json)\n", r.stderr)
        for rank, f in enumerate(files):
            with open(f + ".summary.json") as sf:
                s = json.load(sf)
            self.assertEqual((s["schema"], s["schema_version"]), ("memguard.rank_summary", 1))
            self.assertEqual(s["rank"], rank)
            self.assertEqual(s["report"], f)
            self.assertEqual(s["report_bytes"], os.path.getsize(f))
            self.assertEqual(s["run_id"], header(f)["run_id"])
            self.assertEqual(s["peak"], {"bytes_of": "gpu", "bytes": (sizes[rank] + 1) << 20,
                                         "time_ns": s["gpu"]["peak_time_ns"]})
            self.assertEqual(s["gpu"]["live_bytes_at_exit"], sizes[rank] << 20)
            self.assertEqual(s["sites_at_peak"]["top"][0]["bytes"], sizes[rank] << 20)
        m = self.run_cli(["merge", "--json"])
        self.assertEqual(m.returncode, 0, m.stderr)
        j = json.loads(m.stdout)
        self.assertEqual([x["from_summary"] for x in j["ranks"]], [True] * len(sizes))
        self.assertEqual([o["rank"] for o in j["outliers"]["ranks"]], ["3"])
        figures = {f["figure"]: f for f in j["outliers"]["ranks"][0]["figures"]}
        self.assertEqual(figures["peak"]["bytes"], 1537 << 20)
        self.assertEqual(figures["peak"]["median_bytes"], 97 << 20)
        self.assertIn("site", figures)
        text = self.run_cli(["merge"]).stdout
        self.assertIn("1 outlier rank of 6 (", text)
        self.assertIn("  rank 3: peak 1.50 GiB against a median of 97.00 MiB; ", text)
        self.assertRegex(text, r"; site alloc at \S*launch_child.py:\d+ 1.50 GiB against a median of 96.00 MiB\n")
        # Without the summaries merge reads the reports, and says the same.
        for f in files:
            os.unlink(f + ".summary.json")
        self.assertEqual(self.run_cli(["merge"]).stdout, text)
        # --no-summary: none written.
        r = self.run_cli(["run", "--no-summary"] + self.py("alloc_exit", 0))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("summar", r.stderr)
        self.assertEqual(glob.glob(os.path.join(self.dir, "*.summary.json")), [])
        # A run inside another: the outer one writes the summary, once.
        r = self.run_cli(["run", self.cli, "run"] + self.py("alloc_exit", 0))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("memguard: summary: "), 1, r.stderr)
        self.assertEqual(len(glob.glob(os.path.join(self.dir, "*.summary.json"))), 1)

    def test_jsonl_export_queried_by_duckdb(self):
        try:
            import duckdb
        except ImportError:
            if os.environ.get("CI"):
                raise  # tools/setup.sh installs it: CI must run this test
            self.skipTest("the duckdb module is not installed (tools/setup.sh installs it)")
        sizes = [64, 320, 128, 32]
        _, files = self.run_ranks_mib(sizes)
        for f in files:
            e = self.run_cli(["export", "--jsonl", f, "-o", f + ".jsonl"])
            self.assertEqual(e.returncode, 0, e.stderr)
        pattern = os.path.join(self.dir, "*.jsonl")
        con = duckdb.connect()
        # The documented queries (docs/fleet-export.md): the view, then each rank's peak and its
        # largest site.
        con.execute(f"""
            CREATE VIEW fleet AS
              SELECT * FROM read_json('{pattern}', format = 'newline_delimited',
                                      union_by_name = true, sample_size = -1)""")
        rows = con.execute("""
            SELECT s.run_id, s.rank, s.host, s.summary.peak.bytes AS peak, t.label, t.bytes
            FROM fleet s JOIN fleet t ON t.record = 'site' AND t.report = s.report AND t.position = 0
            WHERE s.record = 'summary'
            ORDER BY peak DESC""").fetchall()
        self.assertEqual([r[1] for r in rows], [1, 2, 0, 3])
        self.assertEqual({r[0] for r in rows}, {header(files[0])["run_id"]})
        self.assertEqual([r[3] for r in rows], [(m + 1) << 20 for m in sorted(sizes, reverse=True)])
        self.assertEqual([r[5] for r in rows], [m << 20 for m in sorted(sizes, reverse=True)])
        self.assertRegex(rows[0][4], r"^alloc at \S*launch_child.py:\d+$")
        # Sites of all ranks as one table: the bytes at each rank's peak add up to its peak.
        sums = dict(con.execute("SELECT rank, sum(bytes) FROM fleet WHERE record = 'site' GROUP BY rank").fetchall())
        self.assertEqual(sums, {r: (m + 1) << 20 for r, m in enumerate(sizes)})

    def test_merge_does_not_guess_without_run_ids(self):
        empty = self.run_cli(["merge"])
        self.assertEqual((empty.returncode, empty.stderr), (2, "memguard: error: no memguard report in '.'\n"))
        # Preloaded by hand, no run id: a report without one.
        env = self.env(LD_PRELOAD=self.lib, RANK="0")
        p = subprocess.run(self.py("alloc_exit", 0), cwd=self.dir, env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.reports("memguard.*.rank0.*.mgr")), 1)
        self.assertNotIn("run_id", header(self.reports()[0]))
        m = self.run_cli(["merge"])
        self.assertEqual(m.returncode, 2)
        self.assertEqual(m.stderr, "memguard: error: 1 report in '.' but none with a run id (reports of runs under "
                                   "'memguard run' or torchrun have one): name the report files, or give "
                                   "--template\n")

    def test_torchelastic_run_id(self):
        for given, expected in (("3f2a-uuid", "3f2a-uuid"), ("none", None)):
            d = tempfile.mkdtemp(dir=self.dir)
            env = self.env(LD_PRELOAD=self.lib, TORCHELASTIC_RUN_ID=given, LOCAL_RANK="1")
            p = subprocess.run(self.py("alloc_exit", 0), cwd=d, env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            [report] = glob.glob(os.path.join(d, "memguard.*.rank1.*.mgr"))
            self.assertEqual(header(report).get("run_id"), expected)
        # MEMGUARD_RUN_ID (memguard run's) wins.
        r = self.run_cli(["run", "--run-id", "outer"] + self.py("alloc_exit", 0),
                         env=self.env(TORCHELASTIC_RUN_ID="elastic"))
        self.assertEqual(header(os.path.join(self.dir, self.listed(r.stderr)[0]))["run_id"], "outer")

    # --- workers and subprocesses ---------------------------------------------------------------------

    def check_family(self, args, count):
        r = self.run_cli(["run"] + self.py(*args))
        self.assertEqual(r.returncode, 0, r.stderr)
        files = self.listed(r.stderr)
        self.assertEqual(len(files), count, r.stderr)
        self.assertEqual(sorted(os.path.join(self.dir, f) for f in files), self.reports())
        infos = [header(os.path.join(self.dir, f)) for f in files]
        self.assertEqual(len({i["run_id"] for i in infos}), 1)
        self.assertEqual(len({i["pid"] for i in infos}), count)
        return infos

    def test_multiprocessing_spawn_workers(self):
        self.check_family(["mp", "spawn", 2], 3)

    def test_multiprocessing_fork_workers(self):
        infos = self.check_family(["mp", "fork", 2], 3)
        parent = [i for i in infos if i["ppid"] not in {j["pid"] for j in infos}]
        self.assertEqual(len(parent), 1)  # the two others are its forked children

    def test_subprocess_children(self):
        self.check_family(["subprocess", 2], 3)

    def test_torchrun_ranks(self):
        # torchrun itself (on the CPU: its workers allocate through the fake runtime).
        probe = subprocess.run([sys.executable, "-c", "import torch.distributed.run"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("torch.distributed.run cannot be imported")
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", CHILD,
                    "alloc_exit", "0"]
        r = self.run_cli(["run", "--"] + torchrun, timeout=110)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = self.listed(r.stderr)
        self.assertEqual(sorted(re.sub(r"\.\d+\.mgr$", "", f).rsplit(".", 1)[1] for f in files), ["rank0", "rank1"],
                         r.stderr)
        m = self.run_cli(["merge", "--json"])
        self.assertEqual([x["rank"] for x in json.loads(m.stdout)["ranks"]], ["0", "1"], m.stderr)
        # Preloaded by hand, without memguard run: torchrun's rendezvous id is the run id.
        d = tempfile.mkdtemp(dir=self.dir)
        p = subprocess.run(torchrun, cwd=d, env=self.env(LD_PRELOAD=self.lib), capture_output=True, text=True,
                           timeout=110)
        self.assertEqual(p.returncode, 0, p.stderr)
        ids = {header(f).get("run_id") for f in glob.glob(os.path.join(d, "memguard.*.rank*.mgr"))}
        self.assertEqual(len(ids), 1)
        self.assertIsNotNone(ids.pop())
        m = self.run_cli(["merge", d])
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertIn(": 2 reports in ", m.stdout.splitlines()[0])

    # --- env ------------------------------------------------------------------------------------------

    def test_env_helper(self):
        r = self.run_cli(["env", "--stack-depth", "5", "--report-encoding", "text", "--output", "it's %p.mgr"],
                         env=self.env(MEMGUARD_NVTX="0", MEMGUARD_RUN_MANIFEST="/x/y", LD_PRELOAD=self.fake))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], f"export LD_PRELOAD={self.lib}:{self.fake}")
        self.assertRegex(lines[1], r"^export MEMGUARD_RUN_ID=\d{8}-\d{6}-[0-9a-f]{8}$")
        self.assertEqual(sorted(lines[2:]), ["export MEMGUARD_NVTX=0", "export MEMGUARD_OUTPUT='it'\\''s %p.mgr'",
                                             "export MEMGUARD_REPORT_ENCODING=text", "export MEMGUARD_STACK_DEPTH=5"])
        # The shell reads back the values.
        sh = subprocess.run(["sh", "-c", r.stdout + 'printf "%s\\n" "$MEMGUARD_OUTPUT"'], capture_output=True,
                            text=True)
        self.assertEqual(sh.stdout, "it's %p.mgr\n")
        j = self.run_cli(["env", "--json", "--run-id", "r1"])
        self.assertEqual(json.loads(j.stdout), {"LD_PRELOAD": self.lib, "MEMGUARD_RUN_ID": "r1"})
        # A process started with only that environment (a scrubbing launcher's) writes a report
        # with the run id.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MGTEST_FAKE_CUDART": self.fake,
               **json.loads(j.stdout)}
        p = subprocess.run(self.py("alloc_exit", 0), cwd=self.dir, env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(header(self.reports()[0])["run_id"], "r1")
        bad = self.run_cli(["env", "extra"])
        self.assertEqual(bad.returncode, 2)


if __name__ == "__main__":
    unittest.main()
