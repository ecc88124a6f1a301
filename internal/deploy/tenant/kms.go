package tenant

import (
	"fmt"
	"strings"
)

// CheckKMSKey validates a --kms-key value as SQS's KmsMasterKeyId takes
// it: a key id (a UUID, or mrk-<32 hex> for a multi-Region key), a key
// ARN, an alias name (alias/<name>) or an alias ARN. AWS-managed aliases
// (alias/aws/...) are refused: SNS cannot encrypt with them, so the
// telemetry topic could never deliver to the queue.
func CheckKMSKey(key string) error {
	const want = "give a KMS key id, a key ARN (arn:aws:kms:<region>:<account>:key/<id>), alias/<name> or an alias ARN"
	bad := func(why string) error {
		return fmt.Errorf("--kms-key %.120q: %s: %s", key, why, want)
	}
	if key == "" || len(key) > 2048 {
		return bad("empty or over 2048 characters")
	}
	resource := key
	if strings.HasPrefix(key, "arn:") {
		parts := strings.SplitN(key, ":", 6)
		if len(parts) != 6 || !strings.HasPrefix(parts[1], "aws") || parts[2] != "kms" || parts[3] == "" ||
			len(parts[4]) != 12 || strings.Trim(parts[4], "0123456789") != "" {
			return bad("not a KMS ARN")
		}
		resource = parts[5]
		if id, ok := strings.CutPrefix(resource, "key/"); ok {
			if !keyID(id) {
				return bad("the ARN's key id is not a UUID or mrk-<32 hex>")
			}
			return nil
		}
		if !strings.HasPrefix(resource, "alias/") {
			return bad("the ARN names neither key/ nor alias/")
		}
	}
	if name, ok := strings.CutPrefix(resource, "alias/"); ok {
		if strings.HasPrefix(name, "aws/") {
			return bad("an AWS-managed key cannot be used: SNS cannot encrypt with it, so telemetry would never reach the queue; create a customer managed key")
		}
		if name == "" || len(name) > 250 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_-") != "" {
			return bad("an alias name is 1-250 letters, digits, '/', '_' or '-'")
		}
		return nil
	}
	if !keyID(key) {
		return bad("not a key id")
	}
	return nil
}

// keyID reports whether s is a KMS key id: a lower-case UUID, or mrk-
// and 32 lower-case hex digits.
func keyID(s string) bool {
	const hex = "0123456789abcdef"
	if rest, ok := strings.CutPrefix(s, "mrk-"); ok {
		return len(rest) == 32 && strings.Trim(rest, hex) == ""
	}
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return false
			}
		} else if !strings.ContainsRune(hex, rune(s[i])) {
			return false
		}
	}
	return true
}
