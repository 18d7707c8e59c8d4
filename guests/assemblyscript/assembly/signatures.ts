// The module's signature table (ABI.md §5). AssemblyScript cannot emit the
// `callbox.signatures` custom section, so each callback registers its line
// with `signature(...)` at the top level of its file, and the
// `callbox_signatures` export hands the host the assembled table.

const lines = new Array<string>();
let table: ArrayBuffer | null = null;

/**
 * Declares the signature of the callback exported as `exportName`; call it
 * at the top level, next to the export:
 *
 *     signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]");
 *     export function scale(frame: usize): Status { ... }
 *
 * The host checks every call's inputs against it and derives the output
 * shapes from it before the callback runs.
 */
export function signature(exportName: string, sig: string): void {
  lines.push(exportName + " = " + sig);
  table = null;
}

/**
 * The table as ABI v1 wants it: a u32 byte length, then that many bytes of
 * UTF-8 `export = signature` lines. Built once; kept alive by `table`.
 */
export function signatureTable(): usize {
  let t = table;
  if (t === null) {
    const text = lines.join("\n") + "\n";
    const n = String.UTF8.byteLength(text);
    t = new ArrayBuffer(4 + n);
    store<u32>(changetype<usize>(t), <u32>n);
    String.UTF8.encodeUnsafe(changetype<usize>(text), text.length, changetype<usize>(t) + 4);
    table = t;
  }
  return changetype<usize>(t);
}
