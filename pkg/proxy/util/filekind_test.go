package util

import (
	"io/fs"
	"testing"
)

func TestFileKind(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{0o644, "regular file"},
		{fs.ModeDir | 0o755, "directory"},
		{fs.ModeSymlink | 0o777, "symbolic link"},
		{fs.ModeNamedPipe, "named pipe (FIFO)"},
		{fs.ModeSocket, "socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "character device"},
		{fs.ModeDevice, "block device"},
		{fs.ModeIrregular, "special file"},
	} {
		if got := FileKind(tc.mode); got != tc.want {
			t.Errorf("FileKind(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
