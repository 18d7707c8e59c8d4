package lowering

// Compile parses program text, type-checks it against cat and runs the
// passes (Lower). The result is ready for Emit and Eval.
func Compile(file string, src []byte, cat Catalog, opts Options) (*Program, error) {
	p, err := Parse(file, src)
	if err != nil {
		return nil, err
	}
	if err := Check(p, cat); err != nil {
		return nil, err
	}
	if err := Lower(p, opts); err != nil {
		return nil, err
	}
	return p, nil
}
