// Command snavio is the command-line tool of the Snavio command-messaging
// platform. See internal/app for everything it does.
package main

import (
	"os"

	"github.com/snavio/snavio/internal/app"
)

func main() { os.Exit(app.Main()) }
