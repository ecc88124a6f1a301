// Package benchdata holds inputs shared by the benchmarks of package
// dispatch and its sub-packages. It imports nothing of theirs, so the
// in-package tests of any of them (envelope's included) can use it.
package benchdata

import (
	"fmt"
	"strings"
)

// Payload1K returns a canonical JSON object of exactly 1024 bytes: the
// command payload of the envelope, shield and dispatcher benchmarks, so
// that their figures (and the floors they are compared with) are for the
// same message.
func Payload1K() string {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; ; i++ {
		field := fmt.Sprintf(`"k%03d":"value number %04d",`, i, i)
		if sb.Len()+len(field) > 1024-40 {
			break
		}
		sb.WriteString(field)
	}
	pad := 1024 - sb.Len() - len(`"zz":""}`)
	sb.WriteString(`"zz":"` + strings.Repeat("p", pad) + `"}`)
	return sb.String()
}
