package controlapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// queuePolicy is an SQS queue policy as far as the test routing reads
// it: whether it lets one role call one action on the queue. It is a
// structural evaluation of what delivery depends on, not a full IAM
// engine: docs/registry/test-routing.md lists what it evaluates.
type queuePolicy struct {
	statements []queueStatement
}

type queueStatement struct {
	sid, effect string
	// principal and notPrincipal: nil when absent.
	principal, notPrincipal *principalSet
	// action, notAction, resource, notResource: nil when absent.
	action, notAction, resource, notResource []string
	condition                                map[string]map[string][]string
}

type principalSet struct {
	any bool
	aws []string
}

// maxPolicyBytes is SQS's limit on a queue policy.
const maxPolicyBytes = 20 << 10

// parseQueuePolicy decodes a queue's Policy attribute; "" is a policy
// without statements. Every field IAM lets be a string or a list is read
// as a list.
func parseQueuePolicy(s string) (*queuePolicy, error) {
	if strings.TrimSpace(s) == "" {
		return &queuePolicy{}, nil
	}
	if len(s) > maxPolicyBytes {
		return nil, fmt.Errorf("%d bytes, over SQS's %d", len(s), maxPolicyBytes)
	}
	var raw struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	var stmts []json.RawMessage
	switch t := bytes.TrimSpace(raw.Statement); {
	case len(t) == 0 || string(t) == "null":
	case t[0] == '[':
		if err := json.Unmarshal(t, &stmts); err != nil {
			return nil, fmt.Errorf("the Statement: %v", err)
		}
	default:
		stmts = []json.RawMessage{t}
	}
	p := &queuePolicy{}
	for i, r := range stmts {
		st, err := parseStatement(r)
		if err != nil {
			return nil, fmt.Errorf("statement %d: %v", i+1, err)
		}
		p.statements = append(p.statements, st)
	}
	return p, nil
}

func parseStatement(r json.RawMessage) (queueStatement, error) {
	var raw struct {
		Sid, Effect                              string
		Principal, NotPrincipal                  json.RawMessage
		Action, NotAction, Resource, NotResource json.RawMessage
		Condition                                map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(r, &raw); err != nil {
		return queueStatement{}, err
	}
	st := queueStatement{sid: raw.Sid, effect: raw.Effect, condition: map[string]map[string][]string{}}
	if st.effect != "Allow" && st.effect != "Deny" {
		return st, fmt.Errorf("the Effect %.40q: want Allow or Deny", st.effect)
	}
	var err error
	if st.principal, err = parsePrincipal(raw.Principal); err != nil {
		return st, fmt.Errorf("the Principal: %v", err)
	}
	if st.notPrincipal, err = parsePrincipal(raw.NotPrincipal); err != nil {
		return st, fmt.Errorf("the NotPrincipal: %v", err)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *[]string
	}{{"Action", raw.Action, &st.action}, {"NotAction", raw.NotAction, &st.notAction}, {"Resource", raw.Resource, &st.resource}, {"NotResource", raw.NotResource, &st.notResource}} {
		if *f.dst, err = stringList(f.raw); err != nil {
			return st, fmt.Errorf("%s: %v", f.name, err)
		}
	}
	for op, kv := range raw.Condition {
		st.condition[op] = map[string][]string{}
		for k, v := range kv {
			vals, err := stringList(v)
			if err != nil {
				return st, fmt.Errorf("the Condition %.40s %.80s: %v", op, k, err)
			}
			st.condition[op][k] = vals
		}
	}
	return st, nil
}

// stringList reads a string, a list of strings, or scalars written as
// strings (a Condition's true or 5); nil when absent.
func stringList(r json.RawMessage) ([]string, error) {
	r = bytes.TrimSpace(r)
	if len(r) == 0 || string(r) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if r[0] == '[' {
		if err := json.Unmarshal(r, &items); err != nil {
			return nil, err
		}
	} else {
		items = []json.RawMessage{r}
	}
	out := []string{}
	for _, it := range items {
		var v any
		if err := json.Unmarshal(it, &v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case bool, float64:
			out = append(out, fmt.Sprint(x))
		default:
			return nil, errors.New("want a string or a list of strings")
		}
	}
	return out, nil
}

func parsePrincipal(r json.RawMessage) (*principalSet, error) {
	r = bytes.TrimSpace(r)
	if len(r) == 0 || string(r) == "null" {
		return nil, nil
	}
	if r[0] == '"' {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, err
		}
		if s != "*" {
			return nil, fmt.Errorf("%.80q: want \"*\" or an object", s)
		}
		return &principalSet{any: true}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r, &m); err != nil {
		return nil, err
	}
	p := &principalSet{}
	aws, err := stringList(m["AWS"])
	if err != nil {
		return nil, fmt.Errorf("AWS: %v", err)
	}
	for _, a := range aws {
		if a == "*" {
			p.any = true
		}
	}
	p.aws = aws
	return p, nil
}

// names reports whether the set names role (by its ARN, its account's
// root or its account id, or "*").
func (p *principalSet) names(role, account string) bool {
	if p.any {
		return true
	}
	partition := strings.SplitN(role, ":", 3)[1]
	for _, a := range p.aws {
		if a == role || a == account || a == "arn:"+partition+":iam::"+account+":root" {
			return true
		}
	}
	return false
}

// condResult is a condition's outcome for the dispatcher's request.
type condResult int

const (
	condTrue condResult = iota
	condFalse
	condUnknown
)

// allows says why role may not call action on the queue; "" when it may.
// A matching Deny refuses (a Deny whose condition cannot be evaluated
// too: the check does not guess in the caller's favour). Without one, an
// Allow grants it; so does the role's own policy when role and queue are
// in the same account (the dispatcher's roles allow the action on every
// queue, docs/deploy.md).
func (p *queuePolicy) allows(role, action, queueARN, queueAccount string) string {
	account, _ := roleAccount(role)
	allowed := false
	for _, st := range p.statements {
		if !st.covers(role, account, action, queueARN) {
			continue
		}
		res, key := st.evalConditions(role, account)
		switch {
		case st.effect == "Deny" && res == condTrue:
			return fmt.Sprintf("statement %q denies it", st.sid)
		case st.effect == "Deny" && res == condUnknown:
			return fmt.Sprintf("statement %q denies it under a condition on %s, which the test routing cannot evaluate", st.sid, key)
		case st.effect == "Allow" && res == condTrue:
			allowed = true
		}
	}
	if allowed || account == queueAccount {
		return ""
	}
	return fmt.Sprintf("no statement allows it, and the queue's account %s is not the role's %s (a queue of another account must grant it)", queueAccount, account)
}

// covers reports whether the statement speaks of role calling action on
// queueARN (its conditions aside).
func (st queueStatement) covers(role, account, action, queueARN string) bool {
	switch {
	case st.principal != nil:
		if !st.principal.names(role, account) {
			return false
		}
	case st.notPrincipal != nil:
		if st.notPrincipal.names(role, account) {
			return false
		}
	default:
		return false
	}
	lower := strings.ToLower(action)
	matchAction := func(pats []string) bool {
		for _, p := range pats {
			if glob(strings.ToLower(p), lower) {
				return true
			}
		}
		return false
	}
	matchResource := func(pats []string) bool {
		for _, p := range pats {
			if glob(p, queueARN) {
				return true
			}
		}
		return false
	}
	switch {
	case st.action != nil && !matchAction(st.action):
		return false
	case st.action == nil && (st.notAction == nil || matchAction(st.notAction)):
		return false
	case st.resource != nil && !matchResource(st.resource):
		return false
	case st.notResource != nil && matchResource(st.notResource):
		return false
	}
	return true
}

// absentKeys are condition keys a dispatcher function's call never
// carries: it calls as itself (no service on its behalf), outside a VPC.
var absentKeys = map[string]bool{"aws:sourcearn": true, "aws:sourceaccount": true, "aws:sourcevpc": true, "aws:sourcevpce": true, "aws:sourceowner": true}

// evalConditions evaluates every condition (they must all hold) for the
// role's call; condUnknown names the first key it cannot evaluate.
func (st queueStatement) evalConditions(role, account string) (condResult, string) {
	request := map[string]string{"aws:principalarn": role, "aws:principalaccount": account, "aws:securetransport": "true"}
	res, unknownKey := condTrue, ""
	for op, kv := range st.condition {
		for key, vals := range kv {
			r := evalCondition(op, strings.ToLower(key), vals, request)
			switch {
			case r == condFalse:
				return condFalse, ""
			case r == condUnknown && unknownKey == "":
				res, unknownKey = condUnknown, key
			}
		}
	}
	return res, unknownKey
}

func evalCondition(op, key string, vals []string, request map[string]string) condResult {
	if strings.HasPrefix(op, "ForAnyValue:") || strings.HasPrefix(op, "ForAllValues:") {
		return condUnknown
	}
	v, present := request[key]
	if !present && !absentKeys[key] {
		return condUnknown
	}
	if op == "Null" {
		if len(vals) != 1 || (vals[0] != "true" && vals[0] != "false") {
			return condUnknown
		}
		return boolResult((vals[0] == "true") == !present)
	}
	base, ifExists := strings.CutSuffix(op, "IfExists")
	var match func(pattern string) bool
	negated := false
	switch base {
	case "StringEquals", "ArnEquals":
		match = func(p string) bool { return p == v }
	case "Bool":
		match = func(p string) bool { return strings.EqualFold(p, v) }
	case "StringNotEquals", "ArnNotEquals":
		match, negated = func(p string) bool { return p == v }, true
	case "StringEqualsIgnoreCase":
		match = func(p string) bool { return strings.EqualFold(p, v) }
	case "StringNotEqualsIgnoreCase":
		match, negated = func(p string) bool { return strings.EqualFold(p, v) }, true
	case "StringLike", "ArnLike":
		match = func(p string) bool { return glob(p, v) }
	case "StringNotLike", "ArnNotLike":
		match, negated = func(p string) bool { return glob(p, v) }, true
	default:
		return condUnknown
	}
	if !present {
		return boolResult(ifExists || negated)
	}
	found := false
	for _, p := range vals {
		if match(p) {
			found = true
			break
		}
	}
	return boolResult(found != negated)
}

func boolResult(b bool) condResult {
	if b {
		return condTrue
	}
	return condFalse
}

// glob matches s against pattern, where '*' is any run of characters and
// '?' any one, as IAM's Like operators and Action and Resource patterns.
func glob(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
