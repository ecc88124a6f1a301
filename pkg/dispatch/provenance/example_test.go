package provenance_test

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// A target team's consumer verifies each message it receives before acting
// on it. The key comes from `snavio key delivery --target orders -o json`
// (its "key" and "key_id"); the attributes are the queue message's (with
// SQS, MessageAttributes[name].StringValue). The values are the first test
// vector of docs/security/delivery-signature.md.
func Example() {
	secret, err := base64.RawURLEncoding.DecodeString("VUyT4MrNOKr-uIn1DOZiOX_MHq6JD_nAmC1ns61cjzY")
	if err != nil {
		panic(err)
	}
	key := provenance.Key{Target: "orders", ID: "d1-de175b5f", Secret: secret}

	body := []byte(`{"metadata":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","timestamp":"2026-11-25T21:00:00.000Z","version_id":"hmac-v1","hmac":"3b1f"},"command":{"source":"demo/app","target":"orders","name":"create","payload":{"qty":2,"sku":"A-1"}}}`)
	attrs := map[string]string{
		"snavio.command_id":    "0f8fad5b-d9cb-469f-a165-70867728950e",
		"snavio.source":        "demo/app",
		"snavio.target":        "orders",
		"snavio.command_name":  "create",
		"snavio.signature":     "v1=0ACk19fgnfV_4GBfkOcran1OYHTRbWWsIVP4xm7ZZMM",
		"snavio.signature_key": "d1-de175b5f",
	}

	m := provenance.FromAttributes(attrs, body)
	if err := provenance.Verify(key, &m); err != nil {
		fmt.Println("refused:", provenance.Reason(err)) // do not act on it; alert
		return
	}
	fmt.Println("from the dispatcher:", m.Source, "->", m.Target, m.Command, m.CommandID)

	// The same message with one byte of the body changed is refused.
	forged := provenance.FromAttributes(attrs, append([]byte(nil), body...))
	forged.Body[len(forged.Body)-4] = '9'
	err = provenance.Verify(key, &forged)
	fmt.Println("forged:", provenance.Reason(err), errors.Is(err, provenance.ErrBadSignature))
	// Output:
	// from the dispatcher: demo/app -> orders create 0f8fad5b-d9cb-469f-a165-70867728950e
	// forged: bad_delivery_signature true
}
