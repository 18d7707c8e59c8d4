package configfile

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/seed4b3e0ccb/callbox/config"
)

// settle is how long Watch lets a burst of file events (an editor's write,
// rename and chmod of one save) go quiet before it reloads once.
const settle = 100 * time.Millisecond

// Watch calls change with the configuration at path, loaded again (Load:
// the file and the process environment, read anew) each time the file
// changes, until ctx ends; it returns then, or at once if the file's
// directory cannot be watched. A change that fails to load is passed as
// the error, with a nil config: the caller keeps what it has (Host.Reload
// refuses nothing it was not given). The directory is watched, not the
// file, so saves that replace the file (write a temporary, rename it over)
// are seen as well as in-place writes; a burst of events is one reload.
// change runs on Watch's goroutine, one call at a time.
//
//	go configfile.Watch(ctx, path, func(cfg *config.Config, err error) {
//		if err == nil {
//			_, err = h.Reload(ctx, cfg)
//		}
//		if err != nil {
//			log.Print(err) // the old configuration keeps serving
//		}
//	})
func Watch(ctx context.Context, path string, change func(*config.Config, error)) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	last := fileSum(abs)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == abs {
				timer.Reset(settle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			change(nil, fmt.Errorf("watching %s: %w", path, err))
		case <-timer.C:
			sum := fileSum(abs)
			if sum == last {
				continue // touched, not changed (the same bytes, or still missing)
			}
			last = sum
			change(Load(path))
		}
	}
}

// fileSum is the sha256 of the file's bytes; zero when it cannot be read.
func fileSum(path string) [sha256.Size]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(data)
}
