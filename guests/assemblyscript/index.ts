// The package entry for users of the SDK as an npm dependency:
//   import { Frame, Status, run, signature } from "@callbox/guest-assemblyscript";
// (asc resolves a package import to <package>/index.ts.) See README.md,
// "From your own project".
export * from "./assembly/index";
