package stack

import (
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Render writes the template as "json" or "yaml", intrinsics resolved
// into CloudFormation's own syntax (Ref, Fn::GetAtt, Fn::Sub).
func Render(t *Template, format string) ([]byte, error) {
	switch format {
	case "json":
		b, err := t.JSON()
		if err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		// Re-indent: goformation indents with one space.
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		return append(out, '\n'), nil
	case "yaml":
		b, err := t.JSON()
		if err != nil {
			return nil, err
		}
		// yaml (not json) keeps integers integers.
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		out, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("render template: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("template format %q: use json or yaml", format)
}
