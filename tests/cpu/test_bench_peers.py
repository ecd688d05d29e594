"""The parts of tools/bench_peers.py that need no GPU and no PyTorch (ctest: cpu.bench_peers).

  liger_commit      the Liger-Kernel commit recorded in the peers JSON: HEAD of the checkout
                    whose top is the given src/ or its parent, "-dirty" when a tracked file
                    is modified, None for a copy inside another repository or no repository
  load_bench_lines  numgate-bench's lines, distinct, in file order, filtered by dtype; a bad
                    file refused with exit 2 and a message naming the file, row and field
  sets_for          input sets so that one rotation touches more than 2x L2, memory permitting
  main              refuses bad arguments, bad input and a bad --liger tree (checked_liger_src)
                    before importing PyTorch; without PyTorch, exit 77 and a message saying
                    so (not a traceback)
  tools/peers_job.sh  (the device call that runs the main job, then this script) refuses a
                    bad argument, or a --liger tree that checked_liger_src refuses, at
                    once: exit 2, a message, nothing built

Run: python3 -m unittest discover -s tests/cpu -p 'test_bench_peers.py' (from the checkout).
"""

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")
SCRIPT = os.path.join(TOOLS, "bench_peers.py")
PEERS_JOB = os.path.join(TOOLS, "peers_job.sh")
sys.path.insert(0, TOOLS)
import bench_peers  # noqa: E402

HAVE_GIT = shutil.which("git") is not None


def setUpModule():
    # Run from a git hook or a CI runner, GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE ... may be
    # set: the miniature repositories below must not commit into that repository, and
    # liger_commit (run in this process) must not read it.
    if HAVE_GIT:
        for k in set(os.environ) - set(bench_peers.git_env()):
            del os.environ[k]


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    r = subprocess.run(["git", "-C", cwd, "-c", "commit.gpgsign=false", *args], capture_output=True, text=True,
                       env=env, check=True)
    return r.stdout.strip()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_liger(top, layout_src=True, version=1):
    """A miniature Liger-Kernel checkout at top (liger_kernel/ under src/ or at the top),
    committed (another `version`, another commit); returns (the src folder main() would
    pass, HEAD)."""
    src = os.path.join(top, "src") if layout_src else top
    write(os.path.join(src, "liger_kernel", "ops", "__init__.py"), "from .rms_norm import *\n")
    write(os.path.join(src, "liger_kernel", "ops", "rms_norm.py"), f"x = {version}\n")
    git(top, "init", "-q")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "liger")
    return src, git(top, "rev-parse", "HEAD")


def quiet(fn, *args):
    """fn(*args) with stderr captured: (result, what it printed)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        r = fn(*args)
    return r, err.getvalue()


@unittest.skipUnless(HAVE_GIT, "git is not installed: liger_commit reads the checkout with git")
class LigerCommit(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="numgate_liger_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_src_folder_of_a_clean_checkout_gives_head(self):
        src, head = make_liger(os.path.join(self.tmp, "Liger-Kernel"))
        self.assertEqual(len(head), 40)
        self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head)

    def test_liger_kernel_at_the_top_gives_head(self):
        top = os.path.join(self.tmp, "flat")
        src, head = make_liger(top, layout_src=False)
        self.assertEqual(src, top)
        self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head)

    def test_the_required_empty_ops_init_marks_it_dirty(self):
        src, head = make_liger(os.path.join(self.tmp, "Liger-Kernel"))
        write(os.path.join(src, "liger_kernel", "ops", "__init__.py"), "")
        self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head + "-dirty")

    def test_untracked_files_do_not_mark_it_dirty(self):
        src, head = make_liger(os.path.join(self.tmp, "Liger-Kernel"))
        write(os.path.join(src, "liger_kernel", "ops", "scratch.py"), "y = 2\n")
        self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head)

    def test_a_path_with_spaces_works(self):
        src, head = make_liger(os.path.join(self.tmp, "a folder with spaces", "Liger Kernel"))
        self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head)

    def test_a_copy_inside_another_repository_records_no_commit(self):
        # e.g. a git-ignored folder of numgate's checkout: the outer repository's HEAD is not
        # Liger's commit.
        outer = os.path.join(self.tmp, "numgate")
        write(os.path.join(outer, "README.md"), "outer\n")
        write(os.path.join(outer, ".gitignore"), ".deps/\n")
        git(outer, "init", "-q")
        git(outer, "add", "-A")
        git(outer, "commit", "-q", "-m", "outer")
        src = os.path.join(outer, ".deps", "liger", "src")
        write(os.path.join(src, "liger_kernel", "ops", "__init__.py"), "")
        self.assertIsNone(quiet(bench_peers.liger_commit, src)[0])

    def test_a_repository_named_by_git_dir_is_not_read(self):
        # GIT_DIR set (as git sets it for hooks) must not replace the checkout src is in.
        src, head = make_liger(os.path.join(self.tmp, "Liger-Kernel"))
        _, other = make_liger(os.path.join(self.tmp, "other"), version=2)
        saved = os.environ.get("GIT_DIR")
        os.environ["GIT_DIR"] = os.path.join(self.tmp, "other", ".git")
        try:
            self.assertEqual(quiet(bench_peers.liger_commit, src)[0], head)
        finally:
            if saved is None:
                del os.environ["GIT_DIR"]
            else:
                os.environ["GIT_DIR"] = saved
        self.assertNotEqual(head, other)

    def test_no_repository_records_no_commit_and_says_why(self):
        src = os.path.join(self.tmp, "plain", "src")
        write(os.path.join(src, "liger_kernel", "ops", "__init__.py"), "")
        env_ceiling = os.environ.get("GIT_CEILING_DIRECTORIES")
        os.environ["GIT_CEILING_DIRECTORIES"] = self.tmp  # never find a repository above the temp folder
        try:
            commit, err = quiet(bench_peers.liger_commit, src)
        finally:
            if env_ceiling is None:
                del os.environ["GIT_CEILING_DIRECTORIES"]
            else:
                os.environ["GIT_CEILING_DIRECTORIES"] = env_ceiling
        self.assertIsNone(commit)
        self.assertIn("liger commit not recorded", err)


class LoadBenchLines(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="numgate_bench_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def bench(self, name, doc):
        p = os.path.join(self.tmp, name)
        write(p, doc if isinstance(doc, str) else json.dumps(doc))
        return p

    def refused(self, paths):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            bench_peers.load_bench_lines(paths, {"bf16"})
        self.assertEqual(cm.exception.code, bench_peers.EXIT_USAGE)
        return err.getvalue()

    def test_distinct_lines_in_file_order_of_the_dtypes_asked(self):
        line = lambda op, dt, shape, params: {"op": op, "dtype": dt, "shape": shape, "params": params}  # noqa: E731
        a = self.bench("a.json", {"schema_version": 2, "results": [
            line("rmsnorm", "bf16", [4, 512, 4096], {"eps": 1e-6}),
            line("rmsnorm", "fp32", [4, 512, 4096], {"eps": 1e-6}),
            line("rmsnorm", "bf16", [4, 512, 4096], {"eps": 1e-6}),  # the same case's other pass
            line("rmsnorm", "bf16", [4, 512, 4096], {"eps": 1e-5}),  # other params: another line
        ]})
        b = self.bench("b.json", {"schema_version": 3, "results": [
            line("swiglu", "bf16", [1, 512, 25600], {}),
            line("rmsnorm", "bf16", [4, 512, 4096], {"eps": 1e-6}),  # seen in a.json
        ]})
        got = bench_peers.load_bench_lines([a, b], {"bf16"})
        self.assertEqual([(g["op"], g["params"]) for g in got],
                         [("rmsnorm", {"eps": 1e-6}), ("rmsnorm", {"eps": 1e-5}), ("swiglu", {})])
        self.assertEqual(got[2]["shape"], [1, 512, 25600])
        self.assertEqual(len(bench_peers.load_bench_lines([a, b], {"bf16", "fp32"})), 4)

    def test_an_unreadable_file_is_refused_naming_it(self):
        missing = os.path.join(self.tmp, "none.json")
        self.assertIn(missing + ": cannot read numgate-bench JSON", self.refused([missing]))
        bad = self.bench("bad.json", "{not json")
        self.assertIn(bad + ": cannot read numgate-bench JSON", self.refused([bad]))

    def test_an_old_schema_is_refused_naming_the_field(self):
        p = self.bench("old.json", {"schema_version": 1, "results": []})
        msg = self.refused([p])
        self.assertIn(p + ": field 'schema_version' is 1", msg)
        self.assertIn("rerun numgate-bench", msg)

    def test_a_line_without_a_field_is_refused_naming_row_and_field(self):
        p = self.bench("hole.json", {"schema_version": 2, "results": [
            {"op": "rmsnorm", "dtype": "bf16", "shape": [2, 8], "params": {}},
            {"op": "rmsnorm", "dtype": "bf16", "shape": [2, 8]}]})
        self.assertIn(p + ": results[1] has no field 'params'", self.refused([p]))


class SetsFor(unittest.TestCase):
    L2 = 50 << 20
    FREE = 80 << 30

    def test_one_rotation_touches_more_than_twice_l2(self):
        for fp in (1 << 20, 16 << 20, 33 << 20, 100 << 20, 1 << 30):
            n = bench_peers.sets_for(fp, self.L2, 2 * fp, self.FREE)
            self.assertGreaterEqual(n, 2, fp)
            if fp <= 2 * self.L2:
                self.assertGreater(n * fp, 2 * self.L2, fp)
            self.assertLessEqual(n, 256)

    def test_memory_caps_the_sets_but_one_always_runs(self):
        self.assertEqual(bench_peers.sets_for(1 << 20, self.L2, 1 << 30, 10 << 30), 6)  # 60% of 10 GiB / 1 GiB
        self.assertEqual(bench_peers.sets_for(1 << 20, self.L2, 1 << 30, 1 << 29), 1)
        self.assertEqual(bench_peers.sets_for(0, self.L2, 0, self.FREE), 256)


class MainWithoutTorch(unittest.TestCase):
    """main() run as a script, PyTorch made unimportable (a torch.py that raises on import
    first on the path), so this holds on the GPU machine too."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="numgate_main_")
        write(os.path.join(self.tmp, "shim", "torch.py"), "raise ImportError('no torch in this test')\n")
        self.bench = os.path.join(self.tmp, "bench.json")
        write(self.bench, json.dumps({"schema_version": 2, "results": [
            {"op": "rmsnorm", "dtype": "bf16", "shape": [2, 8], "params": {"eps": 1e-6}}]}))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_script(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.join(self.tmp, "shim"))
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=60)

    def test_no_pytorch_is_exit_77_with_a_message(self):
        r = self.run_script("--bench", self.bench, "--out", os.path.join(self.tmp, "peers.json"))
        self.assertEqual(r.returncode, bench_peers.EXIT_NO_DEVICE, r.stderr)
        self.assertIn("PyTorch cannot be imported", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "peers.json")))

    def test_bad_arguments_and_input_are_refused_before_pytorch(self):
        out = os.path.join(self.tmp, "peers.json")
        r = self.run_script("--bench", self.bench, "--out", out, "--iters", "0")
        self.assertEqual(r.returncode, bench_peers.EXIT_USAGE)
        self.assertIn("--iters must be >= 1", r.stderr)
        missing = os.path.join(self.tmp, "no_such_bench.json")
        r = self.run_script("--bench", missing, "--out", out)
        self.assertEqual(r.returncode, bench_peers.EXIT_USAGE)
        self.assertIn(missing + ": cannot read numgate-bench JSON", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_bad_liger_tree_is_refused_before_pytorch(self):
        out = os.path.join(self.tmp, "peers.json")
        liger = os.path.join(self.tmp, "Liger-Kernel")
        r = self.run_script("--bench", self.bench, "--out", out, "--liger", liger)
        self.assertEqual(r.returncode, bench_peers.EXIT_USAGE, r.stderr)
        self.assertIn(f"--liger {liger}: no liger_kernel/ops/__init__.py under it or its src/", r.stderr)
        write(os.path.join(liger, "src", "liger_kernel", "ops", "__init__.py"), "from .rms_norm import *\n")
        r = self.run_script("--bench", self.bench, "--out", out, "--liger", liger)
        self.assertEqual(r.returncode, bench_peers.EXIT_USAGE, r.stderr)
        self.assertIn("__init__.py is not empty", r.stderr)
        self.assertFalse(os.path.exists(out))


class PeersJobRefusals(unittest.TestCase):
    """tools/peers_job.sh's refusals come before its main job (minutes of build and replay)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="numgate_peers_job_")
        self.build = os.path.join(self.tmp, "build")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_job(self, *args, cwd=None):
        env = {k: v for k, v in os.environ.items() if k != "OUT"}
        env["NUMGATE_BUILD_DIR"] = self.build
        # Its own process group: should a broken refusal let the job start (cmake, the build),
        # the whole group is killed at the timeout, not left building.
        p = subprocess.Popen(["bash", PEERS_JOB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=cwd, start_new_session=True)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def assert_refused(self, r, message):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(message, r.stderr)
        self.assertFalse(os.path.exists(self.build), "the build folder was created: the job started")

    def test_an_unknown_argument_is_refused(self):
        self.assert_refused(self.run_job("--bogus"), "unknown argument '--bogus'")

    def test_an_option_without_its_value_is_refused(self):
        self.assert_refused(self.run_job("--liger"), "--liger needs a value")
        self.assert_refused(self.run_job("--logs"), "--logs needs a value")
        self.assert_refused(self.run_job("--liger", ""), "--liger needs a non-empty value")
        self.assert_refused(self.run_job("--logs="), "--logs needs a non-empty value")

    def test_a_liger_folder_without_its_ops_package_is_refused(self):
        liger = os.path.join(self.tmp, "Liger-Kernel")
        write(os.path.join(liger, "src", "liger_kernel", "README"), "no ops package here\n")
        message = "no liger_kernel/ops/__init__.py under it or its src/"
        self.assert_refused(self.run_job("--liger", liger), message)
        self.assert_refused(self.run_job("--liger=" + os.path.join(liger, "src")), message)
        # A relative path is the caller's, not the repository root's.
        r = self.run_job("--liger", "Liger-Kernel", cwd=self.tmp)
        self.assert_refused(r, "--liger " + liger + ": " + message)

    def test_an_ops_init_that_imports_every_op_is_refused(self):
        liger = os.path.join(self.tmp, "Liger-Kernel")
        write(os.path.join(liger, "src", "liger_kernel", "ops", "__init__.py"), "from .rms_norm import *\n")
        self.assert_refused(self.run_job("--liger", liger), "__init__.py is not empty")

    def test_help_prints_the_usage(self):
        r = self.run_job("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tools/peers_job.sh [--liger PATH/Liger-Kernel] [--logs DIR]", r.stdout)
        self.assertFalse(os.path.exists(self.build))


if __name__ == "__main__":
    unittest.main()
