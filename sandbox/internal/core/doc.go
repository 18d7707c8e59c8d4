// Package core is what callbox's engine adapters share, so that each
// adapter (wazero, wasmtime) holds only what differs between the engines:
// the host side of the guest's imports (GuestState: callbox.error,
// callbox.log and the minimal WASI profile, with their caps), the
// classification of every failure into the one taxonomy (the *Trap
// constructors: timeouts, fuel, stacks, memory), fuel accounting for the
// metered rewrite, the export lookup check and the two-level compile
// cache. It implements no engine; sandbox is the contract it serves.
package core
