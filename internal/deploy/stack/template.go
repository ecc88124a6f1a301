package stack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// Template is a CloudFormation template of goformation resources. It is
// this package's own, not goformation's cloudformation.Template, because
// that package links every resource type AWS has (30 MB of the snavio
// binary); the resource packages and the intrinsics processor alone do not.
type Template struct {
	AWSTemplateFormatVersion string               `json:"AWSTemplateFormatVersion"`
	Description              string               `json:"Description,omitempty"`
	Parameters               map[string]Parameter `json:"Parameters,omitempty"`
	Resources                map[string]Resource  `json:"Resources"`
	Outputs                  map[string]Output    `json:"Outputs,omitempty"`
}

// Resource is a goformation resource.
type Resource interface{ AWSCloudFormationType() string }

// Parameter is a template parameter.
type Parameter struct {
	Type           string  `json:"Type"`
	Description    *string `json:"Description,omitempty"`
	Default        any     `json:"Default,omitempty"`
	AllowedPattern *string `json:"AllowedPattern,omitempty"`
	AllowedValues  []any   `json:"AllowedValues,omitempty"`
	NoEcho         *bool   `json:"NoEcho,omitempty"`
}

// Output is a template output.
type Output struct {
	Value       any     `json:"Value"`
	Description *string `json:"Description,omitempty"`
	Export      *Export `json:"Export,omitempty"`
}

// Export names an exported output.
type Export struct {
	Name string `json:"Name"`
}

// Intrinsic functions, encoded as goformation encodes them (base64 of
// the function's JSON) so that they fit typed string fields;
// intrinsics.ProcessJSON turns them back into objects when rendering.
func encode(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Ref refers to a resource or parameter.
func Ref(name string) string { return encode(`{"Ref":` + strconv.Quote(name) + `}`) }

// GetAtt reads an attribute of a resource.
func GetAtt(name, attr string) string {
	return encode(`{"Fn::GetAtt":[` + strconv.Quote(name) + `,` + strconv.Quote(attr) + `]}`)
}

// Sub substitutes ${...} references in s.
func Sub(s string) string { return encode(`{"Fn::Sub":` + strconv.Quote(s) + `}`) }

// JSON renders the template with its intrinsics as CloudFormation writes
// them.
func (t *Template) JSON() ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("render template: %w", err)
	}
	b, err = intrinsics.ProcessJSON(b, nil)
	if err != nil {
		return nil, fmt.Errorf("render template: %w", err)
	}
	return append(b, '\n'), nil
}
