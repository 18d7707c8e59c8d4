// callbox guest SDK for AssemblyScript, ABI v1 (abi/ABI.md).
//
// A callback is an exported function taking the host's frame pointer,
// declared with its signature and run through `run`:
//
//     import { Frame, Status, run, signature } from "../assembly";
//     export * from "../assembly/exports";
//
//     signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]");
//     export function scale(frame: usize): Status {
//       return run(frame, (f: Frame): Status => {
//         const x = f.input<f32>(0), factor = f.input<f32>(1)[0], y = f.output<f32>(0);
//         for (let i = 0, n = x.length; i < n; i++) y[i] = x[i] * factor;
//         return Status.OK;
//       });
//     }
//
// Build with `--runtime minimal --use abort=assembly/host/callboxAbort`
// (see build.sh): the module then imports only callbox.error and
// callbox.log.
export { Status } from "./status";
export { DType, dtypeName, dtypeOf } from "./dtype";
export {
  Frame, Tensor, View, Callback, run,
  BoolView, I8View, I16View, I32View, I64View, U8View, U16View, U32View, U64View, F32View, F64View,
} from "./frame";
export { fail, log, Level } from "./host";
export { signature } from "./signatures";
