//go:build windows

package app

import "errors"

func initForOS(windowsService bool) error {
	if windowsService {
		return errors.New("--windows-service is not implemented by this build yet")
	}
	return nil
}
