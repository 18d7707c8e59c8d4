package host

// NewCallbackErrorForTest is a call failure of kind k, for the external
// tests that check every kind.
func NewCallbackErrorForTest(k Kind) *CallbackError {
	return &CallbackError{Callback: "t", kind: k, Message: k.String()}
}

// NewLoadErrorForTest is a load failure of kind k.
func NewLoadErrorForTest(k Kind) *LoadError {
	return &LoadError{Callback: "t", kind: k, Err: k}
}

// CallbackStateForTest reports whether c's pool and module are closed, and
// how many of its instances are alive.
func CallbackStateForTest(c *Callback) (closed bool, live int) {
	return c.closed.Load(), c.pool.stats().Live
}
