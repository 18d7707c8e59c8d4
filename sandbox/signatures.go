package sandbox

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// ReadSignatureTable calls an instance's callbox_signatures export and
// parses the table it points at: how host's load and Inspect read the
// signatures of a module without a signature section.
func ReadSignatureTable(ctx context.Context, inst Instance) (map[string]*abi.Signature, error) {
	fn, err := inst.Export(abi.ExportSignatures, nil, []ValType{I32})
	if err != nil {
		return nil, err
	}
	var stack [1]uint64
	if err := inst.Call(ctx, fn, stack[:]); err != nil {
		return nil, fmt.Errorf("%s: %w", abi.ExportSignatures, err)
	}
	mem := inst.Memory()
	ptr := uint64(uint32(stack[0]))
	hdr, err := abi.GuestBytes(mem, ptr, 4, abi.ExportSignatures+" length")
	if err != nil {
		return nil, err
	}
	n := uint64(binary.LittleEndian.Uint32(hdr))
	if n > abi.MaxSignatureTable {
		return nil, fmt.Errorf("%s: table of %d bytes exceeds %d", abi.ExportSignatures, n, abi.MaxSignatureTable)
	}
	text, err := abi.GuestBytes(mem, ptr+4, n, abi.ExportSignatures+" text")
	if err != nil {
		return nil, err
	}
	table, err := abi.ParseSignatureTable(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", abi.ExportSignatures, err)
	}
	return table, nil
}
