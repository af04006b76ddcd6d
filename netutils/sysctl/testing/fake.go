/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package testing provides an in-memory sysctl.Interface for unit tests.
package testing

import (
	"fmt"
	"maps"
	"os"
	"sync"

	"k8s.io/net-utils/sysctl"
)

// Fake is a map-backed sysctl.Interface. Keys are stored in slash notation
// ("net/ipv4/ip_forward") whichever notation the caller used. It is safe for concurrent use
// through its methods; read Settings directly only when no other goroutine is using the fake.
type Fake struct {
	mu sync.Mutex
	// Settings holds the current values. A missing key behaves like a parameter the kernel
	// does not have.
	Settings map[string]int
	// GetErrors and SetErrors make GetSysctl / SetSysctl of the given key fail with the error,
	// to exercise callers' error paths.
	GetErrors map[string]error
	SetErrors map[string]error
	// Writes records every successful SetSysctl in order.
	Writes []Write
}

// Write is one recorded SetSysctl call.
type Write struct {
	Name  string
	Value int
}

var _ sysctl.Interface = &Fake{}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{
		Settings:  map[string]int{},
		GetErrors: map[string]error{},
		SetErrors: map[string]error{},
	}
}

// GetSysctl returns the stored value, or -1 and an error wrapping os.ErrNotExist if the key
// was never set.
func (f *Fake) GetSysctl(name string) (int, error) {
	key, err := sysctl.PathName(name)
	if err != nil {
		return -1, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.GetErrors[key]; err != nil {
		return -1, err
	}
	v, ok := f.Settings[key]
	if !ok {
		return -1, fmt.Errorf("reading sysctl %q: %w", name, os.ErrNotExist)
	}
	return v, nil
}

// SetSysctl stores newVal. Unlike the kernel it accepts keys that were never set, because
// tests rarely want to pre-declare every parameter.
func (f *Fake) SetSysctl(name string, newVal int) error {
	key, err := sysctl.PathName(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.SetErrors[key]; err != nil {
		return err
	}
	if f.Settings == nil {
		f.Settings = map[string]int{}
	}
	f.Settings[key] = newVal
	f.Writes = append(f.Writes, Write{Name: key, Value: newVal})
	return nil
}

// Snapshot returns a copy of the current settings.
func (f *Fake) Snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.Settings)
}
