// Package storecodec holds the pieces of the embedded store's binary
// records that its packages share (internal/store/embedded for archive,
// telemetry and flow records, internal/store/localqueue for queue
// messages and configs): a field reader whose first failure sticks,
// length-prefixed strings, the record version, time as nanoseconds, and
// the error of a record that does not decode.
//
// Every record starts with its version byte. Fixed-size fields come first,
// at fixed offsets, so a writer can read or patch them (a sequence number,
// a visibility time) without decoding the rest; variable fields are
// uvarint-length-prefixed; the largest field (a body, a detail, an event)
// is last and takes the rest of the record. Decoders check every length
// and never panic (the packages' FuzzDecode* tests).
package storecodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// V1 is the version byte of the records at their first layout.
const V1 = 1

// ErrShort is a record that ends before its fields do.
var ErrShort = errors.New("record truncated")

// ErrCorrupt wraps a record the store cannot decode.
var ErrCorrupt = errors.New("embedded store: corrupt record")

// Corrupt returns the error of the record what (key names it) that err
// says does not decode.
func Corrupt(what, key string, err error) error {
	return fmt.Errorf("%w: %s %q: %v (restore the data file from a backup, or start with a new one)", ErrCorrupt, what, key, err)
}

// Reader reads a record's fields in order; the first failure sticks in
// Err, and every read after it returns a zero value.
type Reader struct {
	// B is what is left to read.
	B   []byte
	Err error
}

// Fail records err unless a failure is recorded already.
func (r *Reader) Fail(err error) {
	if r.Err == nil {
		r.Err = err
	}
}

// U64 reads a big-endian uint64.
func (r *Reader) U64() uint64 {
	if r.Err != nil || len(r.B) < 8 {
		r.Fail(ErrShort)
		return 0
	}
	v := binary.BigEndian.Uint64(r.B)
	r.B = r.B[8:]
	return v
}

// U32 reads a big-endian uint32.
func (r *Reader) U32() uint32 {
	if r.Err != nil || len(r.B) < 4 {
		r.Fail(ErrShort)
		return 0
	}
	v := binary.BigEndian.Uint32(r.B)
	r.B = r.B[4:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.B) < 1 {
		r.Fail(ErrShort)
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Bytes reads n bytes, aliasing the record.
func (r *Reader) Bytes(n int) []byte {
	if r.Err != nil || n < 0 || len(r.B) < n {
		r.Fail(ErrShort)
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Str reads a uvarint-prefixed string of at most max bytes (AppendStr).
func (r *Reader) Str(max int) string {
	n := r.Uvarint()
	if r.Err == nil && n > uint64(max) {
		r.Fail(fmt.Errorf("field of %d bytes, over %d", n, max))
	}
	if r.Err != nil {
		return ""
	}
	return string(r.Bytes(int(n)))
}

// Uvarint reads a uvarint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail(errors.New("bad length"))
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Version reads the version byte of a record of kind what, which must be
// V1.
func (r *Reader) Version(what string) {
	if v := r.Byte(); r.Err == nil && v != V1 {
		r.Fail(fmt.Errorf("%s record version %d, this snavio reads %d", what, v, V1))
	}
}

// AppendStr appends s with its uvarint length (Reader.Str reads it).
func AppendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Nanos returns t as nanoseconds since the Unix epoch, clamped to the
// range an int64 holds from the epoch on (time.Time.UnixNano is undefined
// outside 1678..2262, and the zero Time is in year 1).
func Nanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
