package output

import (
	"bytes"
	"strings"
	"testing"
)

type item struct {
	Name  string         `json:"name"`
	Count int            `json:"count"`
	Tags  []string       `json:"tags,omitempty"`
	Meta  map[string]int `json:"meta,omitempty"`
}

func TestParseFormat(t *testing.T) {
	for _, ok := range []string{"", "table", "json", "yaml", "ndjson", "JSON", " yaml "} {
		if _, err := ParseFormat(ok); err != nil {
			t.Errorf("ParseFormat(%q) = %v", ok, err)
		}
	}
	_, err := ParseFormat("xml")
	if err == nil || !strings.Contains(err.Error(), "use one of table, json, yaml, ndjson") {
		t.Errorf("ParseFormat(xml) = %v", err)
	}
}

func TestResolveDefaultsByTerminal(t *testing.T) {
	if got := Resolve("", true); got != Table {
		t.Errorf("TTY default = %s, want table", got)
	}
	if got := Resolve("", false); got != JSON {
		t.Errorf("pipe default = %s, want json", got)
	}
	if got := Resolve(YAML, true); got != YAML {
		t.Errorf("explicit = %s, want yaml", got)
	}
}

func print(t *testing.T, f Format, v any) string {
	t.Helper()
	var buf bytes.Buffer
	if err := NewPrinter(&buf, f, Styles{}).Print(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestFormats(t *testing.T) {
	items := []item{{Name: "a", Count: 1, Tags: []string{"x"}}, {Name: "b", Count: 2, Meta: map[string]int{"k": 3}}}
	tests := []struct {
		format Format
		v      any
		want   string
	}{
		{JSON, items[0], "{\n  \"name\": \"a\",\n  \"count\": 1,\n  \"tags\": [\n    \"x\"\n  ]\n}\n"},
		{NDJSON, items, "{\"name\":\"a\",\"count\":1,\"tags\":[\"x\"]}\n{\"name\":\"b\",\"count\":2,\"meta\":{\"k\":3}}\n"},
		{NDJSON, items[1], "{\"name\":\"b\",\"count\":2,\"meta\":{\"k\":3}}\n"},
		{YAML, items, "- name: a\n  count: 1\n  tags:\n    - x\n- name: b\n  count: 2\n  meta:\n    k: 3\n"},
		{YAML, map[string]string{"s": "yes: no"}, "s: 'yes: no'\n"},
		{Table, items, "NAME   COUNT   TAGS    META\na      1       [\"x\"]\nb      2               {\"k\":3}\n"},
		{Table, items[0], "FIELD   VALUE\nname    a\ncount   1\ntags    [\"x\"]\n"},
		{Table, []string{"p", "q"}, "VALUE\np\nq\n"},
		{Table, "solo", "VALUE\nsolo\n"},
		{JSON, map[string]string{"html": "<b>&"}, "{\n  \"html\": \"<b>&\"\n}\n"},
	}
	for _, tt := range tests {
		if got := print(t, tt.format, tt.v); got != tt.want {
			t.Errorf("%s %T:\ngot:\n%s\nwant:\n%s", tt.format, tt.v, got, tt.want)
		}
	}
}

type custom struct{}

func (custom) TableHeader() []string { return []string{"a", "b"} }
func (custom) TableRows() [][]string { return [][]string{{"1", "2"}, {"long value", ""}} }

func TestTabularAndEmptyList(t *testing.T) {
	if got, want := print(t, Table, custom{}), "A            B\n1            2\nlong value\n"; got != want {
		t.Errorf("tabular:\n%q\nwant\n%q", got, want)
	}
	if got := print(t, Table, []item{}); got != "" {
		t.Errorf("empty list without header: %q", got)
	}
	if got := print(t, NDJSON, []item{}); got != "" {
		t.Errorf("empty ndjson: %q", got)
	}
}

func TestColourOnlyWhenEnabled(t *testing.T) {
	var plain, coloured bytes.Buffer
	if err := NewPrinter(&plain, Table, NewStyles(&plain, false)).Print(custom{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("disabled styles emitted escapes: %q", plain.String())
	}
	if err := NewPrinter(&coloured, Table, NewStyles(&coloured, true)).Print(custom{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(coloured.String(), "\x1b[1mA") {
		t.Errorf("enabled styles did not bold the header: %q", coloured.String())
	}
	// Escape codes must not change the layout of the body.
	if strings.SplitN(coloured.String(), "\n", 2)[1] != strings.SplitN(plain.String(), "\n", 2)[1] {
		t.Errorf("colour changed the table body:\n%q\n%q", coloured.String(), plain.String())
	}
}

func TestPrintItemStreamsLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewPrinter(&buf, JSON, Styles{})
	for i := range 3 {
		if err := p.PrintItem(item{Name: "n", Count: i}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(buf.String(), "\n"); got != 3 {
		t.Errorf("PrintItem wrote %d lines, want 3: %q", got, buf.String())
	}
}
