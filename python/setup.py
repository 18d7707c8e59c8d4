"""The build of the callbox package; its metadata is in pyproject.toml.

The package is Python (ctypes) around libcallbox.so, a native library built
from callbox's Go sources, which it ships with its header and
callbox-worker (the worker of isolation: process). This file:

- builds those three with ffi/build.sh (Go and a C compiler on PATH) into
  the built package, from the Go sources at hand: the repository around
  this directory (``pip install ./python``) or the sdist's ``_go/`` folder.
  ``CALLBOX_PREBUILT=DIR`` takes them from DIR instead (``make wheel``
  passes ``build/``, which ``make lib`` filled); a package directory that
  already holds all three (copied in by hand) ships them when no Go
  sources are at hand;
- writes the Go sources the library needs into the sdist's ``_go/``, so
  that the sdist builds alone;
- tags the wheel ``py3-none-<platform>``: it carries a native library, so
  it is not ``any``; ``make wheel`` then has auditwheel give it the
  manylinux tag the library's symbols allow.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # Debian 12: python3-wheel

HERE = Path(__file__).resolve().parent
MODULE = "github.com/seed4b3e0ccb/callbox"
NATIVE = ("libcallbox.so", "callbox.h", "callbox-worker")
# The packages the library and the worker are built from, and the files
# beside them the build reads.
GO_TARGETS = ("./ffi", "./cmd/callbox-worker")
GO_EXTRA = ("go.mod", "go.sum", "LICENSE", "ffi/build.sh", "ffi/libcallbox.map", "ffi/include/callbox.h")
GO_FILE_LISTS = ("GoFiles", "CgoFiles", "CFiles", "CXXFiles", "HFiles", "SFiles", "SysoFiles",
                 "EmbedFiles", "IgnoredGoFiles", "IgnoredOtherFiles")


class BuildError(Exception):
    """The library cannot be built here; the message says what is missing."""


def go_root():
    """The callbox Go module to build from: the sdist's _go/, else the
    repository around this directory; None when neither is here."""
    for d in (HERE / "_go", HERE.parent):
        gomod = d / "go.mod"
        if gomod.is_file() and gomod.read_text().startswith("module %s\n" % MODULE):
            return d
    return None


def go_command():
    """The go command: CALLBOX_GO, else go on PATH."""
    go = os.environ.get("CALLBOX_GO") or shutil.which("go")
    if not go:
        raise BuildError(
            "callbox: building libcallbox needs Go (1.26 or later, https://go.dev/dl/) and a C compiler "
            "(gcc or clang, for cgo): no go on PATH. Install Go or set CALLBOX_GO to its go command, "
            "or install a callbox wheel (make wheel builds one).")
    return go


def build_native(root, out):
    """Builds the library, its header and the worker into out with root's
    ffi/build.sh."""
    go = go_command()
    cc = subprocess.run([go, "env", "CC"], capture_output=True, text=True).stdout.strip() or "gcc"
    if not shutil.which(cc.split()[0]):
        raise BuildError("callbox: building libcallbox needs a C compiler for cgo: %r (go env CC) is not on PATH; "
                         "install gcc or clang, or set CC" % cc)
    env = dict(os.environ, GO=go)
    res = subprocess.run(["bash", str(root / "ffi" / "build.sh"), str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode != 0:
        raise BuildError("callbox: building libcallbox from %s failed (exit status %d):\n%s"
                         % (root, res.returncode, res.stdout))


class BuildPy(build_py):
    """build_py that puts the native files into the built package."""

    def run(self):
        super().run()
        dest = Path(self.build_lib) / "callbox"
        dest.mkdir(parents=True, exist_ok=True)
        prebuilt = os.environ.get("CALLBOX_PREBUILT")
        root = go_root()
        if prebuilt:
            self.ship(Path(prebuilt), dest, "CALLBOX_PREBUILT=%s" % prebuilt)
        elif root is not None:
            with tempfile.TemporaryDirectory(prefix="callbox-lib-") as out:
                self.announce("building libcallbox from %s" % root, level=2)
                build_native(root, Path(out))
                self.ship(Path(out), dest, "the build")
        elif not all((dest / name).is_file() for name in NATIVE):
            raise BuildError("callbox: no libcallbox to ship: this source tree has neither callbox's Go "
                             "sources (go.mod above python/, or the sdist's _go/) nor %s in callbox/, and "
                             "CALLBOX_PREBUILT is not set" % ", ".join(NATIVE))

    @staticmethod
    def ship(src, dest, what):
        for name in NATIVE:
            f = src / name
            if not f.is_file():
                raise BuildError("callbox: %s has no %s" % (what, name))
            shutil.copyfile(f, dest / name)
        for name in ("libcallbox.so", "callbox-worker"):
            os.chmod(dest / name, 0o755)


class Sdist(sdist):
    """sdist that carries the Go sources the library is built from, in _go/."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = go_root()
        if root is None:
            raise BuildError("callbox: an sdist needs callbox's Go sources (make it from a checkout)")
        for rel in go_sources(root):
            target = Path(base_dir) / "_go" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, target)


def go_sources(root):
    """The files of root's Go module that the library and the worker are
    built from (go list -deps), with the files their build reads."""
    res = subprocess.run([go_command(), "list", "-deps", "-json", *GO_TARGETS], cwd=root,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError("callbox: go list failed:\n" + res.stderr)
    files = set(GO_EXTRA)
    dec = json.JSONDecoder()
    text, i = res.stdout, 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            break
        pkg, i = dec.raw_decode(text, i)
        if pkg.get("Module", {}).get("Path") != MODULE:
            continue
        rel = Path(pkg["Dir"]).relative_to(root)
        for key in GO_FILE_LISTS:
            files.update(str(rel / f) for f in pkg.get(key) or ())
    return sorted(files)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPy, "sdist": Sdist, "bdist_wheel": PlatformWheel})
