package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// errConfigFileChanged makes the process exit when its config file changes, as
// upstream does: the supervisor restarts it with the new file.
var errConfigFileChanged = errors.New("content of the proxy server's configuration file was updated")

// configWatcher reports changes to one file on errCh.
type configWatcher struct {
	path    string
	watcher *fsnotify.Watcher
}

func newConfigWatcher(path string) (*configWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching config file %q: %w", path, err)
	}
	if err := w.Add(path); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watching config file %q: %w", path, err)
	}
	return &configWatcher{path: filepath.Clean(path), watcher: w}, nil
}

// run forwards a write or rename of the file (editors and ConfigMap updates replace
// it) as errConfigFileChanged, and watch errors as themselves, until ctx is done.
func (c *configWatcher) run(ctx context.Context, errCh chan<- error) {
	go func() {
		defer func() { _ = c.watcher.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-c.watcher.Events:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Write) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
					select {
					case errCh <- errConfigFileChanged:
					case <-ctx.Done():
					}
					return
				}
			case err, ok := <-c.watcher.Errors:
				if !ok {
					return
				}
				select {
				case errCh <- fmt.Errorf("watching config file %q: %w", c.path, err):
				case <-ctx.Done():
				}
				return
			}
		}
	}()
}
