package sandbox

import "github.com/seed4b3e0ccb/callbox/abi"

// Import is a function the host provides to guests: what a module may
// import, by module, name and type.
type Import struct {
	Module, Name string
	Type         FuncType
}

// WASIModule is the import module name of WASI preview 1.
const WASIModule = "wasi_snapshot_preview1"

// Imports lists the functions a module may import: callbox.error and
// callbox.log always, the minimal WASI profile (abi/ABI.md) when wasi is
// granted. The load check (CheckModule) refuses any other import, or one
// of another type; every engine provides exactly these.
func Imports(wasi bool) []Import {
	out := []Import{
		{abi.ImportModule, abi.ImportError, FuncType{Params: []ValType{I32, I32}}},
		{abi.ImportModule, abi.ImportLog, FuncType{Params: []ValType{I32, I32, I32}}},
	}
	if wasi {
		for _, w := range wasiImports {
			out = append(out, Import{WASIModule, w.name, compactType(w.sig)})
		}
	}
	return out
}

// wasiImports are the minimal WASI profile's functions, each with its type
// in compact form: 'i' i32, 'I' i64, results after '>'. The profile
// grants stdout and stderr (as log lines), clocks and random bytes; the
// calls that bear capabilities (files, sockets) exist so that wasi-libc
// and Go's wasip1 modules link, and deny.
var wasiImports = []struct{ name, sig string }{
	{"args_get", "ii>i"},
	{"args_sizes_get", "ii>i"},
	{"environ_get", "ii>i"},
	{"environ_sizes_get", "ii>i"},
	{"clock_res_get", "ii>i"},
	{"clock_time_get", "iIi>i"},
	{"fd_write", "iiii>i"},
	{"fd_read", "iiii>i"},
	{"fd_close", "i>i"},
	{"fd_fdstat_get", "ii>i"},
	{"fd_filestat_get", "ii>i"},
	{"fd_prestat_get", "ii>i"},
	{"fd_prestat_dir_name", "iii>i"},
	{"fd_seek", "iIii>i"},
	{"fd_tell", "ii>i"},
	{"poll_oneoff", "iiii>i"},
	{"proc_exit", "i"},
	{"proc_raise", "i>i"},
	{"sched_yield", ">i"},
	{"random_get", "ii>i"},
	{"fd_advise", "iIIi>i"},
	{"fd_allocate", "iII>i"},
	{"fd_datasync", "i>i"},
	{"fd_fdstat_set_flags", "ii>i"},
	{"fd_fdstat_set_rights", "iII>i"},
	{"fd_filestat_set_size", "iI>i"},
	{"fd_filestat_set_times", "iIIi>i"},
	{"fd_pread", "iiiIi>i"},
	{"fd_pwrite", "iiiIi>i"},
	{"fd_readdir", "iiiIi>i"},
	{"fd_renumber", "ii>i"},
	{"fd_sync", "i>i"},
	{"path_create_directory", "iii>i"},
	{"path_filestat_get", "iiiii>i"},
	{"path_filestat_set_times", "iiiiIIi>i"},
	{"path_link", "iiiiiii>i"},
	{"path_open", "iiiiiIIii>i"},
	{"path_readlink", "iiiiii>i"},
	{"path_remove_directory", "iii>i"},
	{"path_rename", "iiiiii>i"},
	{"path_symlink", "iiiii>i"},
	{"path_unlink_file", "iii>i"},
	{"sock_accept", "iii>i"},
	{"sock_recv", "iiiiii>i"},
	{"sock_send", "iiiii>i"},
	{"sock_shutdown", "ii>i"},
}

// compactType reads a compact signature (wasiImports).
func compactType(sig string) FuncType {
	var t FuncType
	out := &t.Params
	for _, c := range sig {
		switch c {
		case 'i':
			*out = append(*out, I32)
		case 'I':
			*out = append(*out, I64)
		case '>':
			out = &t.Results
		}
	}
	return t
}
