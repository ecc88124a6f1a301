// Package cfnfake is a fake of CloudFormation's query protocol for tests:
// no emulator implements change sets, so this stands in for the service.
// It speaks the wire protocol the SDK speaks (form-encoded POST, SigV4,
// XML answers), so the real client and its waiters run against it. It
// keeps stacks in memory, computes a change set by comparing templates
// (added, removed and modified resources; a changed physical name
// replaces), refuses an empty change set as CloudFormation does, and
// moves stacks through their states one poll at a time. Failures are
// set per fake: a change set that fails, or a resource whose creation
// or update fails and rolls the stack back.
package cfnfake

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Request is one call the fake received.
type Request struct {
	Action string
	Form   url.Values
}

// Fake is the CloudFormation fake. Use it as an http.Handler.
type Fake struct {
	mu       sync.Mutex
	stacks   map[string]*stack // by name; deleted stacks stay by id
	byID     map[string]*stack
	requests []Request
	seq      int
	now      time.Time

	// failChangeSet and failResource are set by FailChangeSets and
	// FailResource, under mu: tests set them while the fake serves.
	failChangeSet, failResource string
	// RevealAll shows every pending event at the first poll, so a stack
	// reaches its final state at the second: for callers that poll with
	// the CLI's real delays (seconds), not the tests' milliseconds.
	RevealAll bool
}

// FailChangeSets makes every change set created from now on fail with
// reason; "" lets them succeed again.
func (f *Fake) FailChangeSets(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failChangeSet = reason
}

// FailResource makes the create or update of the resource with this
// logical id fail, rolling the stack back; "" lets it succeed again.
func (f *Fake) FailResource(logicalID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failResource = logicalID
}

// PutStack adds a stack as if deployed earlier: in status, its outputs
// those given (its template holds nothing else).
func (f *Fake) PutStack(name, status string, outputs map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	outs := map[string]any{}
	for k, v := range outputs {
		outs[k] = map[string]any{"Value": v}
	}
	f.seq++
	s := &stack{name: name, id: fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:stack/%s/%d", name, f.seq), status: status,
		template: map[string]any{"Outputs": outs}, changeSets: map[string]*changeSet{}}
	f.stacks[name] = s
	f.byID[s.id] = s
}

// New returns an empty fake.
func New() *Fake {
	return &Fake{stacks: map[string]*stack{}, byID: map[string]*stack{}, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

type changeSet struct {
	id, name, typ, status, reason string
	template                      map[string]any
	params                        map[string]string
	changes                       []change
	polls                         int
}

type change struct{ action, id, typ, replacement string }

type event struct {
	id, logical, typ, status, reason string
	at                               time.Time
}

type stack struct {
	name, id, status string
	template         map[string]any
	params           map[string]string
	changeSets       map[string]*changeSet // by id
	events           []event               // newest first
	pending          []event               // revealed one poll at a time
	final            string
	polls            int
}

// Requests returns the calls received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Actions returns the action of every call received so far, in order.
func (f *Fake) Actions() []string {
	var out []string
	for _, r := range f.Requests() {
		out = append(out, r.Action)
	}
	return out
}

// Status returns a stack's status, "" when there is none.
func (f *Fake) Status(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.stacks[name]; s != nil {
		return s.status
	}
	return ""
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeErr(w, 400, "InvalidAction", "the fake speaks the query protocol: POST a form")
		return
	}
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/cloudformation/aws4_request") {
		writeErr(w, 403, "IncompleteSignature", "the request is not signed (SigV4) for cloudformation")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeErr(w, 400, "MalformedQueryString", err.Error())
		return
	}
	action := r.PostForm.Get("Action")
	if r.PostForm.Get("Version") != "2010-05-15" {
		writeErr(w, 400, "InvalidParameterValue", "Version must be 2010-05-15")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, Request{Action: action, Form: r.PostForm})
	f.now = f.now.Add(time.Second)
	var body string
	var err *apiError
	switch action {
	case "DescribeStacks":
		body, err = f.describeStacks(r.PostForm)
	case "CreateChangeSet":
		body, err = f.createChangeSet(r.PostForm)
	case "DescribeChangeSet":
		body, err = f.describeChangeSet(r.PostForm)
	case "ExecuteChangeSet":
		body, err = f.executeChangeSet(r.PostForm)
	case "DeleteChangeSet":
		body, err = f.deleteChangeSet(r.PostForm)
	case "DeleteStack":
		body, err = f.deleteStack(r.PostForm)
	case "DescribeStackEvents":
		body, err = f.describeStackEvents(r.PostForm)
	default:
		err = &apiError{400, "InvalidAction", "the fake does not implement " + action}
	}
	if err != nil {
		writeErr(w, err.status, err.code, err.msg)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<%sResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><%sResult>%s</%sResult><ResponseMetadata><RequestId>fake-%d</RequestId></ResponseMetadata></%sResponse>`,
		action, action, body, action, len(f.requests), action)
}

type apiError struct {
	status    int
	code, msg string
}

func validation(format string, args ...any) *apiError {
	return &apiError{400, "ValidationError", fmt.Sprintf(format, args...)}
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fake</RequestId></ErrorResponse>`, esc(code), esc(msg))
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func el(name, value string) string {
	if value == "" {
		return ""
	}
	return "<" + name + ">" + esc(value) + "</" + name + ">"
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// lookup finds a stack by name or id; deleted stacks only by id.
func (f *Fake) lookup(nameOrID string) *stack {
	if s := f.byID[nameOrID]; s != nil {
		return s
	}
	if s := f.stacks[nameOrID]; s != nil && s.status != "DELETE_COMPLETE" {
		return s
	}
	return nil
}

// advance reveals the next pending events and, when none are left,
// moves the stack to its final state: one step per poll (all pending
// events in one with revealAll).
func (s *stack) advance(revealAll bool) {
	if s.final == "" {
		return
	}
	s.polls++
	if len(s.pending) > 0 {
		n := (len(s.pending) + 1) / 2
		if revealAll {
			n = len(s.pending)
		}
		for _, e := range s.pending[:n] {
			s.events = append([]event{e}, s.events...)
		}
		s.pending = s.pending[n:]
		return
	}
	s.status, s.final = s.final, ""
}

func (f *Fake) describeStacks(form url.Values) (string, *apiError) {
	name := form.Get("StackName")
	s := f.lookup(name)
	if s == nil {
		return "", validation("Stack with id %s does not exist", name)
	}
	s.advance(f.RevealAll)
	var outs strings.Builder
	if strings.HasSuffix(s.status, "_COMPLETE") && !strings.Contains(s.status, "ROLLBACK") && s.status != "DELETE_COMPLETE" {
		outputs, _ := s.template["Outputs"].(map[string]any)
		keys := sortedKeys(outputs)
		for _, k := range keys {
			v := outputs[k].(map[string]any)["Value"]
			fmt.Fprintf(&outs, "<member>%s%s</member>", el("OutputKey", k), el("OutputValue", resolve(v, s)))
		}
	}
	// Parameters as CloudFormation describes them: NoEcho values masked.
	var params strings.Builder
	declared, _ := s.template["Parameters"].(map[string]any)
	for _, k := range sortedKeys(s.params) {
		v := s.params[k]
		if d, _ := declared[k].(map[string]any); d["NoEcho"] == true {
			v = "****"
		}
		fmt.Fprintf(&params, "<member>%s%s</member>", el("ParameterKey", k), el("ParameterValue", v))
	}
	return fmt.Sprintf("<Stacks><member>%s%s%s%s<Parameters>%s</Parameters><Outputs>%s</Outputs></member></Stacks>",
		el("StackName", s.name), el("StackId", s.id), el("StackStatus", s.status), el("CreationTime", ts(f.now)), params.String(), outs.String()), nil
}

// resolve gives an output's value: literals as they are, intrinsics as
// the fake's stand-in values.
func resolve(v any, s *stack) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		for k, a := range x {
			b, _ := json.Marshal(a)
			return "fake:" + k + ":" + strings.Trim(string(b), `"[]`)
		}
	}
	return fmt.Sprint(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func members(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[fmt.Sprintf("%s.member.%d", prefix, i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func (f *Fake) createChangeSet(form url.Values) (string, *apiError) {
	name, csName, typ := form.Get("StackName"), form.Get("ChangeSetName"), form.Get("ChangeSetType")
	if name == "" || csName == "" {
		return "", validation("StackName and ChangeSetName are required")
	}
	if typ == "" {
		typ = "UPDATE"
	}
	var tpl map[string]any
	body := form.Get("TemplateBody")
	if body == "" {
		return "", validation("the fake takes TemplateBody only (got TemplateURL %q)", form.Get("TemplateURL"))
	}
	if err := json.Unmarshal([]byte(body), &tpl); err != nil {
		return "", validation("Template format error: %v", err)
	}
	s := f.lookup(name)
	switch {
	case typ == "CREATE" && s != nil && s.status != "REVIEW_IN_PROGRESS":
		return "", &apiError{400, "AlreadyExistsException", "Stack [" + name + "] already exists and cannot be created again with the changeSet [" + csName + "]."}
	case typ == "UPDATE" && s == nil:
		return "", validation("Stack [%s] does not exist", name)
	}
	caps := members(form, "Capabilities")
	if _, ok := tpl["Resources"].(map[string]any); ok && !contains(caps, "CAPABILITY_NAMED_IAM") && strings.Contains(body, `"RoleName"`) {
		return "", &apiError{400, "InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_NAMED_IAM]"}
	}
	if s == nil {
		f.seq++
		s = &stack{name: name, id: fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:stack/%s/%d", name, f.seq), status: "REVIEW_IN_PROGRESS", changeSets: map[string]*changeSet{}}
		f.stacks[name] = s
		f.byID[s.id] = s
	}
	params := map[string]string{}
	for i := 1; ; i++ {
		k := form.Get(fmt.Sprintf("Parameters.member.%d.ParameterKey", i))
		if k == "" {
			break
		}
		if form.Get(fmt.Sprintf("Parameters.member.%d.UsePreviousValue", i)) == "true" {
			if typ == "CREATE" {
				return "", validation("Invalid input for parameter key %s. Cannot specify usePreviousValue as true for a new stack", k)
			}
			prev, ok := s.params[k]
			if !ok {
				return "", validation("Invalid input for parameter key %s. Cannot specify usePreviousValue as true for a parameter key not in the previous template", k)
			}
			params[k] = prev
			continue
		}
		params[k] = form.Get(fmt.Sprintf("Parameters.member.%d.ParameterValue", i))
	}
	if err := checkParams(tpl, params); err != nil {
		return "", err
	}
	f.seq++
	cs := &changeSet{id: fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:changeSet/%s/%d", csName, f.seq), name: csName, typ: typ,
		status: "CREATE_IN_PROGRESS", template: tpl, params: params}
	cs.changes = diff(s.template, tpl, s.params, params)
	s.changeSets[cs.id] = cs
	return el("Id", cs.id) + el("StackId", s.id), nil
}

// checkParams refuses parameters as CloudFormation does: one the template
// does not declare, one without a value or default, a value outside its
// AllowedPattern.
func checkParams(tpl map[string]any, params map[string]string) *apiError {
	declared, _ := tpl["Parameters"].(map[string]any)
	var missing []string
	for _, k := range sortedKeys(declared) {
		d, _ := declared[k].(map[string]any)
		v, given := params[k]
		if !given {
			if _, def := d["Default"]; !def {
				missing = append(missing, k)
			}
			continue
		}
		if pat, ok := d["AllowedPattern"].(string); ok {
			if re, err := regexp.Compile(pat); err == nil && !re.MatchString(v) {
				return validation("Parameter '%s' must match pattern %s", k, pat)
			}
		}
	}
	if len(missing) > 0 {
		return validation("Parameters: [%s] must have values", strings.Join(missing, ", "))
	}
	for k := range params {
		if _, ok := declared[k]; !ok {
			return validation("Parameters: [%s] do not exist in the template", k)
		}
	}
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// physicalNames are the properties whose change replaces a resource.
var physicalNames = []string{"Name", "TableName", "QueueName", "FunctionName", "RoleName", "BucketName", "TopicName", "ArchiveName", "LogGroupName", "AlarmName"}

// diff compares two templates' resources: added, removed, modified
// (replaced when a physical name changed). A changed parameter modifies
// every resource that refers to it (Ref or Fn::Sub).
func diff(old, new map[string]any, oldParams, newParams map[string]string) []change {
	or, _ := old["Resources"].(map[string]any)
	nr, _ := new["Resources"].(map[string]any)
	var out []change
	for _, id := range sortedKeys(nr) {
		n := nr[id].(map[string]any)
		typ, _ := n["Type"].(string)
		o, ok := or[id].(map[string]any)
		if !ok {
			out = append(out, change{"Add", id, typ, ""})
			continue
		}
		np, _ := n["Properties"].(map[string]any)
		op, _ := o["Properties"].(map[string]any)
		changed := !reflect.DeepEqual(np, op)
		if !changed {
			b, _ := json.Marshal(np)
			for k, v := range newParams {
				if oldParams[k] != v && (strings.Contains(string(b), `{"Ref":"`+k+`"}`) || strings.Contains(string(b), "${"+k+"}")) {
					changed = true
				}
			}
		}
		if !changed {
			continue
		}
		repl := "False"
		for _, p := range physicalNames {
			if !reflect.DeepEqual(np[p], op[p]) {
				repl = "True"
			}
		}
		out = append(out, change{"Modify", id, typ, repl})
	}
	for _, id := range sortedKeys(or) {
		if _, ok := nr[id]; !ok {
			typ, _ := or[id].(map[string]any)["Type"].(string)
			out = append(out, change{"Remove", id, typ, ""})
		}
	}
	return out
}

func (f *Fake) changeSet(form url.Values) (*stack, *changeSet, *apiError) {
	ref := form.Get("ChangeSetName")
	for _, s := range f.byID {
		if name := form.Get("StackName"); name != "" && name != s.name && name != s.id {
			continue
		}
		for _, cs := range s.changeSets {
			if cs.id == ref || cs.name == ref {
				return s, cs, nil
			}
		}
	}
	return nil, nil, &apiError{404, "ChangeSetNotFound", "ChangeSet [" + ref + "] does not exist"}
}

func (f *Fake) describeChangeSet(form url.Values) (string, *apiError) {
	s, cs, err := f.changeSet(form)
	if err != nil {
		return "", err
	}
	if cs.status == "CREATE_IN_PROGRESS" {
		cs.polls++
		if cs.polls > 1 {
			switch {
			case f.failChangeSet != "":
				cs.status, cs.reason = "FAILED", f.failChangeSet
			case len(cs.changes) == 0:
				cs.status, cs.reason = "FAILED", "The submitted information didn't contain changes. Submit different information to create a change set."
			default:
				cs.status = "CREATE_COMPLETE"
			}
		}
	}
	exec := "UNAVAILABLE"
	if cs.status == "CREATE_COMPLETE" {
		exec = "AVAILABLE"
	}
	var changes strings.Builder
	for _, c := range cs.changes {
		fmt.Fprintf(&changes, "<member><Type>Resource</Type><ResourceChange>%s%s%s%s%s</ResourceChange></member>",
			el("Action", c.action), el("LogicalResourceId", c.id), el("PhysicalResourceId", physical(s, c)), el("ResourceType", c.typ), el("Replacement", c.replacement))
	}
	return el("ChangeSetName", cs.name) + el("ChangeSetId", cs.id) + el("StackId", s.id) + el("StackName", s.name) +
		el("Status", cs.status) + el("StatusReason", cs.reason) + el("ExecutionStatus", exec) + el("CreationTime", ts(f.now)) +
		"<Changes>" + changes.String() + "</Changes>", nil
}

func physical(s *stack, c change) string {
	if c.action == "Add" {
		return ""
	}
	return s.name + "-" + c.id
}

func (f *Fake) executeChangeSet(form url.Values) (string, *apiError) {
	s, cs, err := f.changeSet(form)
	if err != nil {
		return "", err
	}
	if cs.status != "CREATE_COMPLETE" {
		return "", &apiError{400, "InvalidChangeSetStatus", "ChangeSet [" + cs.id + "] cannot be executed in its current status of [" + cs.status + "]"}
	}
	verb := "UPDATE"
	if cs.typ == "CREATE" {
		verb = "CREATE"
	}
	s.status = verb + "_IN_PROGRESS"
	s.pending = []event{f.event(s, s.name, "AWS::CloudFormation::Stack", verb+"_IN_PROGRESS", "User Initiated")}
	failed := false
	for _, c := range cs.changes {
		rs := "UPDATE"
		switch c.action {
		case "Add":
			rs = "CREATE"
		case "Remove":
			rs = "DELETE"
		}
		s.pending = append(s.pending, f.event(s, c.id, c.typ, rs+"_IN_PROGRESS", ""))
		if c.id == f.failResource {
			s.pending = append(s.pending, f.event(s, c.id, c.typ, rs+"_FAILED", "Resource handler returned message: \"fake failure of "+c.id+"\""))
			failed = true
			break
		}
		s.pending = append(s.pending, f.event(s, c.id, c.typ, rs+"_COMPLETE", ""))
	}
	switch {
	case failed && verb == "CREATE":
		s.pending = append(s.pending, f.event(s, s.name, "AWS::CloudFormation::Stack", "ROLLBACK_IN_PROGRESS", "The following resource(s) failed to create: ["+f.failResource+"]. Rollback requested by user."),
			f.event(s, s.name, "AWS::CloudFormation::Stack", "ROLLBACK_COMPLETE", ""))
		s.final = "ROLLBACK_COMPLETE"
	case failed:
		s.pending = append(s.pending, f.event(s, s.name, "AWS::CloudFormation::Stack", "UPDATE_ROLLBACK_IN_PROGRESS", "The following resource(s) failed to update: ["+f.failResource+"]."),
			f.event(s, s.name, "AWS::CloudFormation::Stack", "UPDATE_ROLLBACK_COMPLETE", ""))
		s.final = "UPDATE_ROLLBACK_COMPLETE"
	default:
		s.pending = append(s.pending, f.event(s, s.name, "AWS::CloudFormation::Stack", verb+"_COMPLETE", ""))
		s.final = verb + "_COMPLETE"
		s.template, s.params = cs.template, cs.params
	}
	s.changeSets = map[string]*changeSet{}
	return "", nil
}

func (f *Fake) event(s *stack, logical, typ, status, reason string) event {
	f.seq++
	return event{id: fmt.Sprintf("%s-%d", logical, f.seq), logical: logical, typ: typ, status: status, reason: reason, at: f.now.Add(time.Duration(f.seq) * time.Millisecond)}
}

func (f *Fake) deleteChangeSet(form url.Values) (string, *apiError) {
	s, cs, err := f.changeSet(form)
	if err != nil {
		return "", err
	}
	delete(s.changeSets, cs.id)
	return "", nil
}

func (f *Fake) deleteStack(form url.Values) (string, *apiError) {
	s := f.lookup(form.Get("StackName"))
	if s == nil {
		return "", nil // deleting a missing stack succeeds, as on AWS
	}
	if s.status == "REVIEW_IN_PROGRESS" {
		s.status = "DELETE_COMPLETE"
		return "", nil
	}
	s.status = "DELETE_IN_PROGRESS"
	s.pending = []event{f.event(s, s.name, "AWS::CloudFormation::Stack", "DELETE_IN_PROGRESS", "User Initiated")}
	res, _ := s.template["Resources"].(map[string]any)
	for _, id := range sortedKeys(res) {
		typ, _ := res[id].(map[string]any)["Type"].(string)
		status := "DELETE_COMPLETE"
		if dp, _ := res[id].(map[string]any)["DeletionPolicy"].(string); dp == "Retain" {
			status = "DELETE_SKIPPED"
		}
		s.pending = append(s.pending, f.event(s, id, typ, status, ""))
	}
	s.pending = append(s.pending, f.event(s, s.name, "AWS::CloudFormation::Stack", "DELETE_COMPLETE", ""))
	s.final = "DELETE_COMPLETE"
	s.template = nil
	return "", nil
}

func (f *Fake) describeStackEvents(form url.Values) (string, *apiError) {
	name := form.Get("StackName")
	s := f.lookup(name)
	if s == nil {
		return "", validation("Stack [%s] does not exist", name)
	}
	var b strings.Builder
	b.WriteString("<StackEvents>")
	for _, e := range s.events {
		fmt.Fprintf(&b, "<member>%s%s%s%s%s%s%s%s</member>", el("StackId", s.id), el("StackName", s.name), el("EventId", e.id),
			el("LogicalResourceId", e.logical), el("ResourceType", e.typ), el("Timestamp", ts(e.at)), el("ResourceStatus", e.status), el("ResourceStatusReason", e.reason))
	}
	b.WriteString("</StackEvents>")
	return b.String(), nil
}
