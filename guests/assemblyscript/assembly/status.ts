/**
 * A callback's result (ABI.md §4): the absl / XLA FFI error codes. Any
 * other value is an ABI violation. On a non-zero status the message last
 * passed to `fail` (or an abort) becomes the error the caller sees.
 */
export enum Status {
  OK = 0,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
}

/** Whether ABI v1 defines `status`; `run` reports any other as UNKNOWN. */
export function isStatus(status: Status): bool {
  switch (status) {
    case Status.OK:
    case Status.UNKNOWN:
    case Status.INVALID_ARGUMENT:
    case Status.RESOURCE_EXHAUSTED:
    case Status.FAILED_PRECONDITION:
    case Status.UNIMPLEMENTED:
    case Status.INTERNAL:
      return true;
  }
  return false;
}
