//go:build !linux

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

package ipvs

import (
	"fmt"
	"runtime"
)

// Available always fails: IPVS is a Linux facility.
func Available() error {
	return fmt.Errorf("%w: %s is not Linux", ErrNotAvailable, runtime.GOOS)
}

// New returns an Interface whose methods all fail, since IPVS is a Linux facility.
func New() Interface {
	return unavailable{err: Available()}
}

// NewChecked always fails: IPVS is a Linux facility.
func NewChecked() (Interface, error) {
	return nil, Available()
}
