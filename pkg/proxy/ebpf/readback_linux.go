//go:build linux

package ebpf

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"
)

func notExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }

// ReadMaps returns the datapath's maps for reading back.
func (d *Datapath) ReadMaps() *ReadMaps {
	m := &d.objs.socketlbMaps
	return &ReadMaps{Frontends: m.Frontends, Sets: m.Sets, Backends: m.Backends, NotFound: notExist}
}

// OpenPinnedReadOnly opens the maps pinned under pinPath (default DefaultPinPath)
// read-only, for a process that only reads them (a tracer); close returns them.
func OpenPinnedReadOnly(pinPath string) (r *ReadMaps, close func(), err error) {
	if pinPath == "" {
		pinPath = DefaultPinPath
	}
	var opened []*ebpf.Map
	close = func() {
		for _, m := range opened {
			_ = m.Close()
		}
	}
	get := func(name string) *ebpf.Map {
		if err != nil {
			return nil
		}
		p := filepath.Join(pinPath, name)
		m, lerr := ebpf.LoadPinnedMap(p, &ebpf.LoadPinOptions{ReadOnly: true})
		if lerr != nil {
			err = fmt.Errorf("opening pinned map %q: %w", p, lerr)
			return nil
		}
		opened = append(opened, m)
		return m
	}
	fe, sets, be := get("frontends"), get("sets"), get("backends")
	if err != nil {
		close()
		return nil, nil, err
	}
	return &ReadMaps{Frontends: fe, Sets: sets, Backends: be, NotFound: notExist}, close, nil
}
