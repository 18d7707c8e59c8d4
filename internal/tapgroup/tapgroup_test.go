package tapgroup

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroup(t *testing.T) {
	var g Group
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal("an unused group is idle:", err)
	}
	release := make(chan struct{})
	var ran atomic.Int32
	first := errors.New("first")
	g.Go(func() error { <-release; ran.Add(1); return first })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a pending tap = %v, want the context's error", err)
	}
	close(release)
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { ran.Add(1); return errors.New("second") })
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := g.Take(); got != first {
		t.Fatalf("Take = %v, want the first error", got)
	}
	if got := g.Take(); got != nil {
		t.Fatalf("Take after Take = %v, want nil", got)
	}
	if ran.Load() != 2 {
		t.Fatalf("ran %d taps, want 2", ran.Load())
	}
}
