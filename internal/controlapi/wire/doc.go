// Package wire holds the control API's request and response types, its
// documented limits and the input rules a client checks before it calls:
// what the CLI (internal/platform) and the server (internal/controlapi)
// exchange as JSON. It holds no handler and imports no
// server or store package, so a client links none of them.
package wire
