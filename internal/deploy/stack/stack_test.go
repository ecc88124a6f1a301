package stack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7/schema"
	"github.com/xeipuuv/gojsonschema"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// cfnDefs is goformation's CloudFormation schema, parsed once.
var cfnDefs = sync.OnceValues(func() (map[string]any, error) {
	var root map[string]any
	err := json.Unmarshal([]byte(schema.CloudformationSchema), &root)
	return root, err
})

// subSchema is top with only the definitions it refers to, transitively:
// compiling and validating against the whole schema takes seconds, as
// every resource is tried against every resource type.
func subSchema(defs map[string]any, top map[string]any) map[string]any {
	picked := map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				name := strings.TrimPrefix(ref, "#/definitions/")
				if _, done := picked[name]; !done {
					picked[name] = defs[name]
					walk(defs[name])
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(top)
	out := map[string]any{"definitions": picked}
	for k, v := range top {
		out[k] = v
	}
	return out
}

// validate checks a template (intrinsics replaced) against the schema:
// its top level with Resources as any object, then each resource against
// its own type's definition; an unknown type is an error.
func validate(t *testing.T, doc map[string]any) []string {
	t.Helper()
	root, err := cfnDefs()
	if err != nil {
		t.Fatal(err)
	}
	defs := root["definitions"].(map[string]any)
	check := func(what string, sch map[string]any, v any) []string {
		s, err := gojsonschema.NewSchema(gojsonschema.NewGoLoader(sch))
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Validate(gojsonschema.NewGoLoader(v))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range res.Errors() {
			out = append(out, what+": "+e.String())
		}
		return out
	}
	top := map[string]any{}
	for k, v := range root {
		if k != "definitions" {
			top[k] = v
		}
	}
	props := map[string]any{}
	for k, v := range root["properties"].(map[string]any) {
		props[k] = v
	}
	props["Resources"] = map[string]any{"type": "object"}
	top["properties"] = props
	problems := check("template", subSchema(defs, top), doc)
	for id, r := range doc["Resources"].(map[string]any) {
		typ, _ := r.(map[string]any)["Type"].(string)
		if defs[typ] == nil || strings.Contains(typ, ".") {
			problems = append(problems, id+": unknown resource type "+typ)
			continue
		}
		problems = append(problems, check(id, subSchema(defs, map[string]any{"$ref": "#/definitions/" + typ}), r)...)
	}
	return problems
}

func render(t *testing.T, env, format string) []byte {
	t.Helper()
	return renderWith(t, env, Options{}, format)
}

func renderWith(t *testing.T, env string, o Options, format string) []byte {
	t.Helper()
	tpl, err := BuildWith(env, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(tpl, format)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTemplateGolden keeps the rendered template as a golden file, so
// every change to the stack shows in review. -update rewrites it.
func TestTemplateGolden(t *testing.T) {
	for _, g := range []struct {
		name, format string
		o            Options
	}{
		{"template-test.json", "json", Options{}},
		{"template-test.yaml", "yaml", Options{}},
		{"template-test-provisioned.json", "json", Options{ProvisionedConcurrency: 3}},
	} {
		format := g.format
		got := renderWith(t, "test", g.o, format)
		path := filepath.Join("testdata", g.name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/deploy/stack -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the template Build renders; review the diff and run go test ./internal/deploy/stack -update", path)
		}
	}
}

// intrinsicKeys are the functions a template value may be.
var intrinsicKeys = map[string]bool{"Ref": true, "Fn::GetAtt": true, "Fn::Sub": true, "Fn::Join": true, "Fn::If": true,
	"Fn::Select": true, "Fn::Split": true, "Fn::ImportValue": true, "Fn::FindInMap": true, "Fn::Base64": true, "Fn::GetAZs": true}

// placeholders replaces every intrinsic function by a string, as the
// schema knows only literal values; it returns what each referred to.
func placeholders(v any, refs *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if intrinsicKeys[k] {
					*refs = append(*refs, refTargets(k, arg)...)
					return "placeholder"
				}
			}
		}
		for k, e := range x {
			x[k] = placeholders(e, refs)
		}
	case []any:
		for i, e := range x {
			x[i] = placeholders(e, refs)
		}
	}
	return v
}

// refTargets returns the logical ids or parameters an intrinsic names.
func refTargets(fn string, arg any) []string {
	switch fn {
	case "Ref":
		return []string{arg.(string)}
	case "Fn::GetAtt":
		a := arg.([]any)
		return []string{a[0].(string) + "." + a[1].(string)}
	case "Fn::Sub":
		s := arg.(string)
		var out []string
		for {
			i := strings.Index(s, "${")
			if i < 0 {
				return out
			}
			j := strings.Index(s[i:], "}")
			out = append(out, s[i+2:i+j])
			s = s[i+j+1:]
		}
	}
	return nil
}

// TestTemplateMatchesSchema validates the template against
// CloudFormation's resource schema (goformation's copy): unknown
// properties, wrong types, missing required properties and unknown
// resource types fail. Intrinsics become placeholders first; what they
// refer to is checked here instead: every Ref and Sub names a parameter,
// a resource or a pseudo parameter, every GetAtt a resource.
func TestTemplateMatchesSchema(t *testing.T) { checkSchema(t, render(t, "test", "json")) }

// checkSchema is TestTemplateMatchesSchema's check of one rendered template.
func checkSchema(t *testing.T, rendered []byte) {
	var doc map[string]any
	if err := json.Unmarshal(rendered, &doc); err != nil {
		t.Fatal(err)
	}
	var refs []string
	placeholders(doc, &refs)
	for _, p := range validate(t, doc) {
		t.Errorf("schema: %s", p)
	}
	resources := doc["Resources"].(map[string]any)
	params := doc["Parameters"].(map[string]any)
	for _, r := range refs {
		id, attr, isAtt := strings.Cut(r, ".")
		switch {
		case strings.HasPrefix(r, "AWS::"):
		case isAtt && resources[id] != nil:
			_ = attr
		case !isAtt && (resources[id] != nil || params[id] != nil):
		default:
			t.Errorf("template refers to %q, which is no resource or parameter", r)
		}
	}
	if len(refs) < 50 {
		t.Errorf("found %d references; the placeholder walk missed intrinsics", len(refs))
	}
}

// TestSchemaCatchesMistakes proves the schema test can fail: a wrong
// property, a wrong type and an unknown type are each reported.
func TestSchemaCatchesMistakes(t *testing.T) {
	for name, mutate := range map[string]func(r map[string]any){
		"unknown property": func(r map[string]any) {
			r["FlowTable"].(map[string]any)["Properties"].(map[string]any)["TableNam"] = "x"
		},
		"wrong type": func(r map[string]any) {
			r["IngestFunction"].(map[string]any)["Properties"].(map[string]any)["Timeout"] = "ten"
		},
		"missing required": func(r map[string]any) {
			delete(r["IngestRole"].(map[string]any)["Properties"].(map[string]any), "AssumeRolePolicyDocument")
		},
		"unknown type": func(r map[string]any) { r["FlowTable"].(map[string]any)["Type"] = "AWS::DynamoDB::Tabel" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var doc map[string]any
			if err := json.Unmarshal(render(t, "test", "json"), &doc); err != nil {
				t.Fatal(err)
			}
			var refs []string
			placeholders(doc, &refs)
			mutate(doc["Resources"].(map[string]any))
			if len(validate(t, doc)) == 0 {
				t.Errorf("%s: the schema accepted it", name)
			}
		})
	}
}

// TestEveryNameIsScopedByEnv renders two environments and checks that
// no physical name of one appears in the other.
func TestEveryNameIsScopedByEnv(t *testing.T) {
	a := string(render(t, "alpha", "json"))
	bb := string(render(t, "beta", "json"))
	var names []string
	var doc map[string]any
	if err := json.Unmarshal([]byte(a), &doc); err != nil {
		t.Fatal(err)
	}
	for id, r := range doc["Resources"].(map[string]any) {
		props, _ := r.(map[string]any)["Properties"].(map[string]any)
		for _, k := range []string{"Name", "TableName", "QueueName", "FunctionName", "RoleName", "TopicName", "AlarmName", "ArchiveName", "LogGroupName"} {
			if s, ok := props[k].(string); ok {
				if !strings.Contains(s, "alpha") {
					t.Errorf("%s.%s = %q is not scoped by the env", id, k, s)
				}
				names = append(names, k+" "+s)
			}
		}
	}
	sort.Strings(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Errorf("two resources are named %q", names[i])
		}
	}
	for _, s := range names {
		_, s, _ = strings.Cut(s, " ")
		if strings.Contains(bb, s) {
			t.Errorf("%q appears in env beta's template too", s)
		}
	}
	if len(names) < 40 {
		t.Errorf("found %d names, want every named resource", len(names))
	}
}

func TestBuildRefusesBadEnv(t *testing.T) {
	for _, env := range []string{"", "Prod", "-x", "a_b", strings.Repeat("a", 33), "a/b"} {
		if _, err := Build(env); err == nil || !strings.Contains(err.Error(), "env") {
			t.Errorf("Build(%q) = %v, want an error naming the env", env, err)
		}
	}
}

// TestFunctionsHaveOwnRoles: one role per function, each with its own
// name and only its own statements.
func TestFunctionsHaveOwnRoles(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(render(t, "test", "json"), &doc); err != nil {
		t.Fatal(err)
	}
	res := doc["Resources"].(map[string]any)
	seen := map[string]bool{}
	for _, s := range specs() {
		fn := res[s.id+"Function"].(map[string]any)["Properties"].(map[string]any)
		role := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		if role != s.id+"Role" || seen[role] {
			t.Errorf("%s runs as %s, want its own %sRole", s.key, role, s.id)
		}
		seen[role] = true
		b, _ := json.Marshal(res[role])
		if strings.Contains(string(b), `"*"`) && s.key != FnMonitor {
			t.Errorf("%s's role has a wildcard resource: %s", s.key, b)
		}
		// The snapshot writers: the schedule's and the control API's generate.
		if strings.Contains(string(b), "s3:PutObject") != (s.key == FnSnapshot || s.key == FnControl) {
			t.Errorf("%s's role: s3:PutObject only for the snapshot writers", s.key)
		}
	}
}

// TestLongestEnvFitsNameLimits renders the longest environment name and
// checks every physical name against its service's length limit.
func TestLongestEnvFitsNameLimits(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(render(t, strings.Repeat("e", 32), "json"), &doc); err != nil {
		t.Fatal(err)
	}
	limits := map[string]struct {
		prop string
		max  int
	}{
		"AWS::Lambda::Function":  {"FunctionName", 64},
		"AWS::IAM::Role":         {"RoleName", 64},
		"AWS::Events::Rule":      {"Name", 64},
		"AWS::Events::EventBus":  {"Name", 256},
		"AWS::Events::Archive":   {"ArchiveName", 48},
		"AWS::SQS::Queue":        {"QueueName", 80},
		"AWS::DynamoDB::Table":   {"TableName", 255},
		"AWS::SNS::Topic":        {"TopicName", 256},
		"AWS::CloudWatch::Alarm": {"AlarmName", 255},
		"AWS::Logs::LogGroup":    {"LogGroupName", 512},
		"AWS::S3::Bucket":        {"BucketName", 63},
	}
	checked := 0
	for id, r := range doc["Resources"].(map[string]any) {
		typ := r.(map[string]any)["Type"].(string)
		l, ok := limits[typ]
		if !ok {
			continue
		}
		v := r.(map[string]any)["Properties"].(map[string]any)[l.prop]
		if sub, ok := v.(map[string]any); ok {
			v = strings.ReplaceAll(sub["Fn::Sub"].(string), "${AWS::AccountId}", "123456789012")
		}
		name, _ := v.(string)
		if name == "" || len(name) > l.max {
			t.Errorf("%s.%s = %q: %d characters, %s allows 1 to %d", id, l.prop, name, len(name), typ, l.max)
		}
		checked++
	}
	if checked < 60 {
		t.Errorf("checked %d names, want every named resource", checked)
	}
}

// A deploy names its snavio version: in the SnavioVersion output that
// doctor compares, and in every function's description, so that a new
// version is never an output-only update.
func TestVersionIsNamed(t *testing.T) {
	tpl, err := BuildWith("test", Options{Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.Outputs[VersionOutput].Value; got != "v1.2.3" {
		t.Errorf("output %s = %v", VersionOutput, got)
	}
	b, err := Render(tpl, "json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "(snavio v1.2.3)"); n != len(Functions) {
		t.Errorf("%d function descriptions name the version, want %d", n, len(Functions))
	}
	plain, _ := Build("test")
	if _, ok := plain.Outputs[VersionOutput]; ok {
		t.Error("a template built without a version has the version output")
	}
	if _, err := BuildWith("test", Options{Version: "v1 beta"}); err == nil {
		t.Error("a version with a blank was accepted")
	}
}
