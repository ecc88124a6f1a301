// Command gendocs writes snavio's generated files: `go run ./tools/gendocs
// completions man` from the repository root. See internal/gendocs.
package main

import (
	"fmt"
	"os"

	"github.com/snavio/snavio/internal/gendocs"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"completions", "man"}
	}
	for _, d := range dirs {
		if d != "completions" && d != "man" {
			fmt.Fprintf(os.Stderr, "gendocs: unknown directory %q: use completions and/or man\n", d)
			os.Exit(2)
		}
	}
	if err := gendocs.Write(".", dirs...); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
