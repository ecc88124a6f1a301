//go:build linux

package embedded

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openEphemeral gives bbolt an anonymous in-memory file (memfd): the
// ephemeral store runs the same code as the durable one and never touches
// the disk.
func openEphemeral(name string, _ int, _ os.FileMode) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("embedded store: ephemeral memory file: %w", err)
	}
	return os.NewFile(uintptr(fd), "memfd:"+name), nil
}
