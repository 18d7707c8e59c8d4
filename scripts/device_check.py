#!/usr/bin/env python3
"""Helpers of scripts/device-check.sh (a machine with jax, no Go).

  device_check.py ffi-api OUT.json
      reads jax.ffi.include_dir()/xla/ffi/api/c_api.h and writes the XLA FFI
      API version it declares (XLA_FFI_API_MAJOR/MINOR) and whether it is at
      least the one libcallbox will declare in its metadata handshake (0.2).

  device_check.py collect PARTS_DIR OUT.json
      merges what the script's steps left in PARTS_DIR into ONE JSON file:
      steps.tsv (step, exit status, seconds, note), *.junit.xml (pytest
      results, one entry per test), bench.json (python/bench_jax.py),
      cuda/*.json (scripts/device_check_cuda.py), ffi-api.json, machine.json.
      Prints a summary; exit status 1 if any step or check failed.
"""

import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# The API version the library will declare in its metadata handshake; XLA
# accepts a handler whose version is within [0.1, its own].
LIBRARY_FFI_API = (0, 2)


def ffi_api(out):
    res = {"library_declares": "%d.%d" % LIBRARY_FFI_API}
    try:
        import jax

        path = os.path.join(jax.ffi.include_dir(), "xla", "ffi", "api", "c_api.h")
        res["header"] = path
        text = open(path).read()
        major = re.search(r"#define\s+XLA_FFI_API_MAJOR\s+(\d+)", text)
        minor = re.search(r"#define\s+XLA_FFI_API_MINOR\s+(\d+)", text)
        if not (major and minor):
            res["error"] = "XLA_FFI_API_MAJOR/MINOR not found in the header"
        else:
            res["major"], res["minor"] = int(major.group(1)), int(minor.group(1))
            res["at_least_library"] = (res["major"], res["minor"]) >= LIBRARY_FFI_API
    except Exception as e:  # noqa: BLE001  (recorded, not raised)
        res["error"] = "%s: %s" % (type(e).__name__, e)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("XLA FFI API in the installed jaxlib: %s (library declares %s): %s" % (
        "%s.%s" % (res.get("major"), res.get("minor")), res["library_declares"],
        res.get("error") or ("ok, >=" if res.get("at_least_library") else "OLDER than the library's")))
    return 0 if res.get("at_least_library") else 1


def junit(path):
    tests = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = "%s::%s" % (case.get("classname", ""), case.get("name"))
        entry = {"outcome": "passed", "seconds": float(case.get("time") or 0)}
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                entry["outcome"] = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                entry["message"] = (el.get("message") or el.text or "")[:2000]
                break
        tests[name] = entry
    counts = {}
    for t in tests.values():
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
    # A skipped test did not check what it is for: not ok, as a failure is.
    return {"counts": counts, "ok": bool(tests) and not counts.get("failed") and not counts.get("error")
            and not counts.get("skipped"), "tests": tests}


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001
        return {"error": "%s: %s" % (type(e).__name__, e)}


def collect(parts, out):
    doc = {"schema": 1, "steps": {}, "pytest": {}, "cuda": {}}
    steps_path = os.path.join(parts, "steps.tsv")
    if os.path.exists(steps_path):
        for line in open(steps_path):
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 3:
                step, rc, secs = fields[:3]
                note = fields[3] if len(fields) > 3 else ""
                doc["steps"][step] = {"rc": None if rc == "-" else int(rc), "seconds": float(secs),
                                      "ran": rc != "-", "note": note}
    for name in sorted(os.listdir(parts)):
        path = os.path.join(parts, name)
        if name.endswith(".junit.xml"):
            doc["pytest"][name[:-len(".junit.xml")]] = junit(path)
        elif name == "bench.json":
            doc["bench"] = _load(path)
        elif name == "ffi-api.json":
            doc["xla_ffi_api"] = _load(path)
        elif name == "machine.json":
            doc["machine"] = _load(path)
        elif name == "deselected.tsv":
            doc["deselected"] = dict(line.rstrip("\n").split("\t", 1) for line in open(path) if "\t" in line)
    cuda = os.path.join(parts, "cuda")
    if os.path.isdir(cuda):
        for name in sorted(os.listdir(cuda)):
            if name.endswith(".json"):
                doc["cuda"][name[:-5]] = _load(os.path.join(cuda, name))
            elif name.endswith(".log"):  # a copy mode's stderr: its end says why it stopped
                with open(os.path.join(cuda, name), errors="replace") as f:
                    doc.setdefault("cuda_logs", {})[name] = f.read()[-3000:]
    # ok means every step ran and passed: a step that could not run (no GPU,
    # no jax, no pytest) is a failure of the check, with its reason.
    failed = [s for s, v in doc["steps"].items() if v["ran"] and v["rc"] != 0]
    failed += ["%s not run (%s)" % (s, v["note"]) for s, v in doc["steps"].items() if not v["ran"]]
    failed += ["pytest %s: %d skipped" % (k, v["counts"]["skipped"]) for k, v in doc["pytest"].items()
               if v["counts"].get("skipped")]
    failed += ["pytest " + k for k, v in doc["pytest"].items() if not v["ok"]]
    for run, res in doc["cuda"].items():
        failed += ["cuda %s: %s" % (run, c["check"]) for c in res.get("checks", []) if not c.get("ok")]
    failed += ["bench: " + c["check"] for c in doc.get("bench", {}).get("checks", []) if not c.get("ok")]
    if doc.get("xla_ffi_api", {}).get("at_least_library") is False:
        failed.append("xla_ffi_api older than the library's")
    doc["failed"] = failed
    doc["ok"] = not failed
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    for suite, res in doc["pytest"].items():
        print("pytest %s: %s" % (suite, res["counts"]))
        for name, t in res["tests"].items():
            if t["outcome"] in ("failed", "error", "skipped"):
                print("  %s %s: %s" % (t["outcome"].upper(), name, t.get("message", "")[:200]))
    for test, why in doc.get("deselected", {}).items():
        print("deselected %s: %s" % (test, why))
    print("steps not run: %s" % (", ".join("%s (%s)" % (s, v["note"]) for s, v in doc["steps"].items() if not v["ran"]) or "none"))
    print("%s; results: %s" % ("ALL OK" if doc["ok"] else "FAILED: " + "; ".join(failed), out))
    return 0 if doc["ok"] else 1


def main(argv):
    if len(argv) == 2 and argv[0] == "ffi-api":
        return ffi_api(argv[1])
    if len(argv) == 3 and argv[0] == "collect":
        return collect(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
