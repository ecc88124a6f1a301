//go:build !linux

package embedded

import (
	"fmt"
	"os"
)

// openEphemeral gives bbolt a temporary file that is unlinked as soon as it
// is open, so nothing remains after Close or a crash. Only Linux has a
// memory-only file (see ephemeral_linux.go).
func openEphemeral(name string, flag int, mode os.FileMode) (*os.File, error) {
	f, err := os.CreateTemp("", name+"-*")
	if err != nil {
		return nil, fmt.Errorf("embedded store: ephemeral file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("embedded store: unlink ephemeral file: %w", err)
	}
	return f, nil
}
