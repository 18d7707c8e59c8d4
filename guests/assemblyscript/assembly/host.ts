// The host's side of ABI v1: its two imports, and the SDK's reporting built
// on them (errors, log lines, aborts). A callbox module may import nothing
// else (ABI.md §1).
import { Status } from "./status";

// @ts-ignore: decorator
@external("callbox", "error")
declare function hostError(ptr: usize, len: usize): void;

// @ts-ignore: decorator
@external("callbox", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;

/**
 * Sets the call's error message and returns `status`, so a callback reads
 * `return fail(Status.INVALID_ARGUMENT, "x[" + i.toString() + "] is NaN")`.
 * The last message set before a non-zero status returns wins.
 */
export function fail(status: Status, message: string): Status {
  const utf8 = String.UTF8.encode(message);
  hostError(changetype<usize>(utf8), <usize>utf8.byteLength);
  return status;
}

/** Log levels of `callbox.log`. */
export enum Level {
  DEBUG = 0,
  INFO = 1,
  WARN = 2,
  ERROR = 3,
}

/**
 * One line to the host's log per call, tagged with the callback's name.
 * The host caps a call's log output (max_log_bytes) and drops what is over.
 */
export namespace log {
  export function debug(message: string): void { write(Level.DEBUG, message); }
  export function info(message: string): void { write(Level.INFO, message); }
  export function warn(message: string): void { write(Level.WARN, message); }
  export function error(message: string): void { write(Level.ERROR, message); }

  export function write(level: Level, message: string): void {
    const utf8 = String.UTF8.encode(message);
    hostLog(level, changetype<usize>(utf8), <usize>utf8.byteLength);
  }
}

// The abort message is built in static memory, not on the heap, so that an
// abort raised by the allocator itself (or with the heap in any state) can
// still report.
const ABORT_BUF_SIZE: usize = 1024;
const abortBuf = memory.data(<i32>ABORT_BUF_SIZE);

/**
 * The module's `abort` (build with `--use abort=assembly/host/callboxAbort`):
 * every `throw`, failed `assert` and runtime error of AssemblyScript ends
 * here. It passes "<message> (<file>:<line>:<column>)" to `callbox.error` and
 * traps, which the host reports as GuestError "guest aborted: <message>" and
 * answers by discarding the instance (ABI.md §4, "Panics").
 */
export function callboxAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const end = abortBuf + ABORT_BUF_SIZE;
  let p = putString(abortBuf, end, message !== null ? message : "abort");
  if (fileName !== null) {
    p = putString(p, end, " (");
    p = putString(p, end, fileName);
    p = putString(p, end, ":");
    p = putU32(p, end, line);
    p = putString(p, end, ":");
    p = putU32(p, end, column);
    p = putString(p, end, ")");
  }
  hostError(abortBuf, p - abortBuf);
  unreachable();
}

// putString writes as much of s as surely fits in [p, end) as UTF-8 (at most
// 3 bytes per UTF-16 unit) and returns the new end.
function putString(p: usize, end: usize, s: string): usize {
  const units = min(<usize>s.length, (end - p) / 3);
  return p + String.UTF8.encodeUnsafe(changetype<usize>(s), <i32>units, p);
}

// putU32 writes v in decimal if it fits in [p, end) and returns the new end.
function putU32(p: usize, end: usize, v: u32): usize {
  let digits: usize = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  if (end - p < digits) return p;
  for (let q = p + digits; q > p; v /= 10) store<u8>(--q, 0x30 + v % 10);
  return p + digits;
}
