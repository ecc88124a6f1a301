package embedded

import (
	"encoding/binary"
	"errors"
)

// compositeKey encodes parts as a sequence of (uvarint length, bytes), so
// that distinct tuples never collide whatever bytes they contain.
func compositeKey(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = binary.AppendUvarint(k, uint64(len(p)))
		k = append(k, p...)
	}
	return k
}

// splitKey is the inverse of compositeKey.
func splitKey(k []byte) ([]string, error) {
	var parts []string
	for len(k) > 0 {
		n, w := binary.Uvarint(k)
		if w <= 0 {
			return nil, errors.New("composite key: bad length prefix")
		}
		k = k[w:]
		if n > uint64(len(k)) {
			return nil, errors.New("composite key: part longer than the key")
		}
		parts = append(parts, string(k[:n]))
		k = k[n:]
	}
	return parts, nil
}
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

// timeKey orders by t (nanoseconds since the epoch; negative times clamp to
// zero) and then by seq.
func timeKey(nanos int64, seq uint64) []byte {
	k := make([]byte, 0, 16)
	k = binary.BigEndian.AppendUint64(k, uint64(max(nanos, 0)))
	return binary.BigEndian.AppendUint64(k, seq)
}
