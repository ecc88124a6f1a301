package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// printTable lays v out as a borderless, left-aligned table in the style of
// kubectl and gh: no truncation, so that nothing is lost when a person
// copies a value out of it.
func (p *Printer) printTable(v any) error {
	header, rows, err := tableOf(v)
	if err != nil {
		return err
	}
	if len(rows) == 0 && len(header) > 0 {
		// An empty list prints its header so that the reader sees which
		// kind of thing there is none of.
		rows = nil
	}
	return RenderTable(p.out, header, rows, p.styles)
}

// RenderTable writes header and rows as a table: header upper-cased,
// columns left-aligned (layoutTable). The header line is styled whole,
// after layout, so that escape codes never count toward column widths.
func RenderTable(w io.Writer, header []string, rows [][]string, styles Styles) error {
	var up []string
	for _, h := range header {
		up = append(up, strings.ToUpper(h))
	}
	out := layoutTable(up, rows)
	if len(up) > 0 {
		first, rest, _ := strings.Cut(out, "\n")
		if first != "" {
			out = styles.Header(first) + "\n" + rest
		}
	}
	_, err := io.WriteString(w, out)
	return err
}

// tableOf returns the header and rows of v: its own layout when it is
// Tabular, otherwise one derived from its JSON form.
func tableOf(v any) ([]string, [][]string, error) {
	if t, ok := v.(Tabular); ok {
		return t.TableHeader(), t.TableRows(), nil
	}
	b, err := marshalJSON(v, false)
	if err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("render table: %w", err)
	}
	switch tok {
	case json.Delim('{'):
		obj, err := readObject(dec)
		if err != nil {
			return nil, nil, err
		}
		rows := make([][]string, len(obj))
		for i, kv := range obj {
			rows[i] = []string{kv.key, kv.value}
		}
		return []string{"field", "value"}, rows, nil
	case json.Delim('['):
		var header []string
		index := map[string]int{}
		var objs [][]kv
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil, nil, fmt.Errorf("render table: %w", err)
			}
			if t != json.Delim('{') {
				// A list of scalars: one column.
				return scalarList(b)
			}
			obj, err := readObject(dec)
			if err != nil {
				return nil, nil, err
			}
			for _, f := range obj {
				if _, seen := index[f.key]; !seen {
					index[f.key] = len(header)
					header = append(header, f.key)
				}
			}
			objs = append(objs, obj)
		}
		rows := make([][]string, len(objs))
		for i, obj := range objs {
			row := make([]string, len(header))
			for _, f := range obj {
				row[index[f.key]] = f.value
			}
			rows[i] = row
		}
		return header, rows, nil
	default:
		return []string{"value"}, [][]string{{scalarString(tok)}}, nil
	}
}

type kv struct{ key, value string }

// readObject reads the members of an object whose '{' was consumed, keeping
// their order; nested values are shown as compact JSON.
func readObject(dec *json.Decoder) ([]kv, error) {
	var out []kv
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("render table: %w", err)
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("render table: %w", err)
		}
		out = append(out, kv{key: key, value: cellOf(raw)})
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return nil, fmt.Errorf("render table: %w", err)
	}
	return out, nil
}

func cellOf(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

func scalarString(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return ""
	case string:
		return t
	default:
		return fmt.Sprint(t)
	}
}

func scalarList(b []byte) ([]string, [][]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, nil, fmt.Errorf("render table: %w", err)
	}
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = []string{cellOf(it)}
	}
	return []string{"value"}, rows, nil
}
