package controlapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// WriteJSON answers with status and v as one line of JSON. The answer is
// never cached: it may hold a tenant's data or a secret shown once.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Refuse(http.StatusInternalServerError, "encoding the answer: "+err.Error(), "retry; if it persists, report a bug").Write(w)
		return
	}
	WriteBody(w, status, "application/json", append(b, '\n'))
}

// WriteBody answers with status and body, a document of type ctype kept
// as it is (such as a signed snapshot).
func WriteBody(w http.ResponseWriter, status int, ctype string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ReadBody reads r's body, at most max bytes: a longer one is refused
// with 413, whose fix says what to send (send).
func ReadBody(r *http.Request, max int64, send string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, BadRequest("reading the request body: "+err.Error(), "resend the request")
	}
	if int64(len(b)) > max {
		return nil, Refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", max), send)
	}
	return b, nil
}

// DecodeJSON decodes b, one JSON value and nothing after it, into v,
// refusing unknown fields. Its error (a 400 refusal) ends with send, what
// to send instead.
func DecodeJSON(b []byte, v any, send string) error {
	if strings.TrimSpace(string(b)) == "" {
		return BadRequest("request body is empty", send)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BadRequest("request body: "+err.Error(), send)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("request body: more than one JSON value", "send one JSON object")
	}
	return nil
}

// Decode reads r's body (at most max bytes) and decodes it into v, as
// ReadBody and DecodeJSON.
func Decode(r *http.Request, max int64, v any, send string) error {
	b, err := ReadBody(r, max, send)
	if err != nil {
		return err
	}
	return DecodeJSON(b, v, send)
}
