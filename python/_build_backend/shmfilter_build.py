"""python/_build_backend/shmfilter_build.py: the PEP 517 build backend of the
shmfilter Python package (python/pyproject.toml). Standard library only, so
pip's isolated build environment needs nothing from a package index.

build_wheel:
  1. libshmfilter.so: $SHMFILTER_BUILD_LIBRARY (an already built
     libshmfilter.so, e.g. build/dev/shared/libshmfilter.so) when set; else
     CMake builds the target shmfilter_shared from the repository this folder
     is in, into $SHMFILTER_BUILD_DIR (default <repo>/build/python-pip, kept
     between installs so a second install rebuilds nothing).
  2. The compiled binding shmfilter/_native (shmfilter/_native.c, the CPython C API)
     with the C compiler Python was built with, linked against that library
     (RPATH $ORIGIN). Without Python's headers (Debian python3-dev) or a
     compiler, the wheel has no _native and `import shmfilter` uses ctypes
     (shmfilter.BINDING == "ctypes"); SHMFILTER_REQUIRE_COMPILED=1 makes that
     an error instead.
  3. A wheel: shmfilter/*.py, py.typed, _native, libshmfilter.so.0, _version.py.
docs/python.md, "Installing".
"""
import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)
NAME = "shmfilter"


def _log(msg):
    print(f"shmfilter_build: {msg}", file=sys.stderr, flush=True)


def _fail(msg):
    raise RuntimeError(f"shmfilter_build: {msg}")


def project_version():
    """The version of project(shmfilter VERSION x.y.z) in <repo>/CMakeLists.txt."""
    path = os.path.join(REPO, "CMakeLists.txt")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        _fail(f"{path} not readable ({e}): install from the shmfilter repository: pip install ./python")
    m = re.search(r"project\(\s*shmfilter\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        _fail(f"no 'project(shmfilter VERSION x.y.z)' in {path}")
    return m.group(1)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    _fail("no sdist: the package is built from the repository (pip install ./python), whose CMake "
          "project builds libshmfilter")


def _run(cmd, **kw):
    _log("$ " + " ".join(shlex.quote(c) for c in cmd))
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        _fail(f"{cmd[0]} exited {r.returncode}: see its output above (pip install -v shows it)")


def _library():
    """The path of a built libshmfilter.so.X.Y.Z."""
    given = os.environ.get("SHMFILTER_BUILD_LIBRARY")
    if given:
        if not os.path.isfile(given):
            _fail(f"SHMFILTER_BUILD_LIBRARY={given} is not a file: point it at a built libshmfilter.so")
        return os.path.realpath(given)
    if not os.path.isfile(os.path.join(REPO, "include", "shmfilter", "shmfilter.h")):
        _fail(f"{REPO} is not the shmfilter repository: install with pip install ./python from a clone")
    cmake = shutil.which("cmake")
    if not cmake:
        _fail("cmake not found: install Debian package cmake (scripts/install-deps.sh)")
    bdir = os.environ.get("SHMFILTER_BUILD_DIR") or os.path.join(REPO, "build", "python-pip")
    if not os.path.isfile(os.path.join(bdir, "CMakeCache.txt")):
        cmd = [cmake, "-S", REPO, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release", "-DSHMFILTER_BUILD_TESTS=OFF",
               "-DSHMFILTER_BUILD_SHMTOOL=OFF", "-DSHMFILTER_BUILD_EXAMPLES=OFF", "-DSHMFILTER_BUILD_BENCHMARKS=OFF",
               "-DSHMFILTER_BUILD_NGINX=OFF", "-DSHMFILTER_BUILD_PYTHON=OFF"]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        _run(cmd, stdout=sys.stderr)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    _run([cmake, "--build", bdir, "--target", "shmfilter_shared", "-j", jobs], stdout=sys.stderr)
    found = sorted(p for p in os.listdir(os.path.join(bdir, "shared")) if re.fullmatch(r"libshmfilter\.so\.\d+\.\d+\.\d+", p))
    if not found:
        _fail(f"the build left no libshmfilter.so.X.Y.Z in {bdir}/shared")
    return os.path.join(bdir, "shared", found[-1])


def _compile_native(lib_copy, out_dir):
    """Builds shmfilter/_native<EXT_SUFFIX> into OUT_DIR; its name, or None (ctypes only)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    inc = sysconfig.get_paths()["include"]
    why = None
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        why = f"{inc}/Python.h not found (install Debian package python3-dev)"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if not why and not shutil.which(cc[0]):
        why = f"no C compiler {cc[0]} (install Debian package gcc)"
    if not why:
        out = os.path.join(out_dir, "_native" + suffix)
        cmd = cc + ["-O2", "-fPIC", "-shared", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                    "-Wno-cast-function-type", "-I", inc, "-I", os.path.join(REPO, "include"),
                    os.path.join(HERE, NAME, "_native.c"), "-o", out, lib_copy, "-Wl,-rpath,$ORIGIN", "-pthread"]
        _log("$ " + " ".join(shlex.quote(c) for c in cmd))
        r = subprocess.run(cmd)
        if r.returncode == 0:
            return os.path.basename(out)
        why = f"the compiler exited {r.returncode}"
    if os.environ.get("SHMFILTER_REQUIRE_COMPILED") == "1":
        _fail(f"the compiled binding was not built: {why}")
    _log(f"WARNING: the compiled binding was not built ({why}): the package uses ctypes (slower)")
    return None


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _tag(compiled):
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if compiled:
        v = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        return f"{v}-{v}-{plat}" if sys.implementation.name == "cpython" else f"py3-none-{plat}"
    return f"py3-none-{plat}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = project_version()
    lib = _library()
    with tempfile.TemporaryDirectory(prefix="shmfilter-wheel-") as tmp:
        pkg = os.path.join(tmp, NAME)
        os.makedirs(pkg)
        soname = "libshmfilter.so.0"
        lib_copy = os.path.join(pkg, soname)
        shutil.copyfile(lib, lib_copy)
        native = _compile_native(lib_copy, pkg)
        files = {}
        src = os.path.join(HERE, NAME)
        for f in sorted(os.listdir(src)):
            if f.endswith((".py", ".pyi")) or f == "py.typed":
                if f == "_version.py":
                    continue
                files[f"{NAME}/{f}"] = open(os.path.join(src, f), "rb").read()
        files[f"{NAME}/_version.py"] = (f'"""Generated by python/_build_backend/shmfilter_build.py from '
                                        f'CMakeLists.txt."""\n__version__ = "{version}"\n').encode()
        files[f"{NAME}/{soname}"] = open(lib_copy, "rb").read()
        if native:
            files[f"{NAME}/{native}"] = open(os.path.join(pkg, native), "rb").read()
        tag = _tag(native is not None)
        dist = f"{NAME}-{version}.dist-info"
        files[f"{dist}/METADATA"] = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
                                     "Summary: Deduplication structures in one crash-safe shared-memory segment\n"
                                     "Requires-Python: >=3.9\nLicense: Apache-2.0\n").encode()
        files[f"{dist}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: shmfilter_build\nRoot-Is-Purelib: false\n"
                                  f"Tag: {tag}\n").encode()
        wheel_name = f"{NAME}-{version}-{tag}.whl"
        path = os.path.join(wheel_directory, wheel_name)
        record = [_record_line(a, d) for a, d in files.items()] + [f"{dist}/RECORD,,"]
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for arc, data in files.items():
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc else 0o644) << 16
                # shared objects stored, not deflated: a RelWithDebInfo library is ~9 MB
                info.compress_type = zipfile.ZIP_STORED if ".so" in arc else zipfile.ZIP_DEFLATED
                z.writestr(info, data)
            z.writestr(zipfile.ZipInfo(f"{dist}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                       ("\n".join(record) + "\n").encode())
        _log(f"built {wheel_name} (binding: {'compiled' if native else 'ctypes'}, library from {lib})")
        return wheel_name
