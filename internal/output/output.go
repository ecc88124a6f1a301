// Package output is the one place where command results become bytes: a
// table for people (tablewriter), JSON when piped, YAML, and NDJSON for
// streams. Commands hand a value to a Printer and never format output
// themselves, so -o works the same everywhere.
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Format is an output format selected with -o/--output.
type Format string

// The output formats.
const (
	Table  Format = "table"
	JSON   Format = "json"
	YAML   Format = "yaml"
	NDJSON Format = "ndjson"
)

// Formats lists the accepted values of -o, in the order help shows them.
var Formats = []string{string(Table), string(JSON), string(YAML), string(NDJSON)}

// ParseFormat validates an -o value. The empty string means "choose by
// terminal" and is returned as is.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case "", Table, JSON, YAML, NDJSON:
		return f, nil
	default:
		return "", fmt.Errorf("invalid output format %q: use one of %s", s, strings.Join(Formats, ", "))
	}
}

// Resolve picks the format to use: the requested one, else a table on a
// terminal and JSON when stdout is piped.
func Resolve(requested Format, stdoutTTY bool) Format {
	if requested != "" {
		return requested
	}
	if stdoutTTY {
		return Table
	}
	return JSON
}

// Tabular is implemented by values that know their own table layout. Values
// that do not implement it are laid out from their JSON form: an object as
// FIELD/VALUE rows, a list of objects as one row each.
type Tabular interface {
	TableHeader() []string
	TableRows() [][]string
}

// Printer writes values in one format.
type Printer struct {
	out    io.Writer
	format Format
	styles Styles
}

// NewPrinter returns a printer writing format to out with styles (which
// carry the colour decision).
func NewPrinter(out io.Writer, format Format, styles Styles) *Printer {
	return &Printer{out: out, format: format, styles: styles}
}

// Format reports the printer's format.
func (p *Printer) Format() Format { return p.format }

// Print writes v. In NDJSON a slice is written one element per line and any
// other value as one line.
func (p *Printer) Print(v any) error {
	switch p.format {
	case JSON:
		return p.printJSON(v)
	case YAML:
		return p.printYAML(v)
	case NDJSON:
		return p.printNDJSON(v)
	default:
		return p.printTable(v)
	}
}

// PrintItem writes one element of a stream: a JSON line in NDJSON and JSON
// modes, otherwise the element as Print would.
func (p *Printer) PrintItem(v any) error {
	if p.format == NDJSON || p.format == JSON {
		return writeJSONLine(p.out, v)
	}
	return p.Print(v)
}

func marshalJSON(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	return buf.Bytes(), nil
}

func (p *Printer) printJSON(v any) error {
	b, err := marshalJSON(v, true)
	if err != nil {
		return err
	}
	_, err = p.out.Write(b)
	return err
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := marshalJSON(v, false)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (p *Printer) printNDJSON(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		for i := range rv.Len() {
			if err := writeJSONLine(p.out, rv.Index(i).Interface()); err != nil {
				return err
			}
		}
		return nil
	}
	return writeJSONLine(p.out, v)
}

// printYAML renders v's JSON form as YAML, so that one set of struct tags
// (json) names fields in every format and field order is kept.
func (p *Printer) printYAML(v any) error {
	b, err := marshalJSON(v, false)
	if err != nil {
		return err
	}
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		return fmt.Errorf("encode output as yaml: %w", err)
	}
	blockStyle(&node)
	enc := yaml.NewEncoder(p.out)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return fmt.Errorf("encode output as yaml: %w", err)
	}
	return enc.Close()
}

// blockStyle turns the flow style that JSON input parses into back into
// YAML's block style; strings are re-quoted only where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
