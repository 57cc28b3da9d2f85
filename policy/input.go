package policy

import (
	"fmt"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The inputs are built as OPA values directly. Handing OPA a Go struct makes
// it convert through a JSON round trip, which took two thirds of a fetch
// decision. TestInputValues keeps these in step with the JSON tags. The
// input types live in package decision (no OPA there), so they are given
// their value method here as local types of the same shape.

type (
	fetchInput   FetchInput
	offloadInput OffloadInput
	mintInput    MintInput
	callInput    CallInput
)

// fields are the members of an input object, in the order they are added.
type fields [][2]*ast.Term

// add appends the member k: v.
func (f *fields) add(k string, v *ast.Term) { *f = append(*f, ast.Item(ast.StringTerm(k), v)) }

// str adds the string member k, unless omitEmpty is set and v is "".
func (f *fields) str(k, v string, omitEmpty bool) {
	if v != "" || !omitEmpty {
		f.add(k, ast.StringTerm(v))
	}
}

// num adds the number member k, unless omitEmpty is set and v is 0.
func (f *fields) num(k string, v int64, omitEmpty bool) {
	if v != 0 || !omitEmpty {
		f.add(k, ast.NewTerm(ast.Number(strconv.FormatInt(v, 10))))
	}
}

// term is the object of the members.
func (f fields) term() *ast.Term { return ast.NewTerm(ast.NewObject(f...)) }

// strArray is ss as an array of strings; nil is null.
func strArray(ss []string) *ast.Term {
	if ss == nil {
		return ast.NullTerm()
	}
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(ts...)
}

// artifactTerm is input.artifact, as a's JSON tags name its members.
func artifactTerm(a ArtifactInfo) *ast.Term {
	f := make(fields, 0, 9)
	f.str("id", a.ID, false)
	f.str("name", a.Name, true)
	f.str("mime_type", a.MimeType, false)
	f.num("size", a.Size, false)
	f.str("sha256", a.SHA256, true)
	f.num("created", a.Created, true)
	f.num("expires", a.Expires, true)
	f.str("tenant", a.Tenant, true)
	f.str("source", a.Source, true)
	return f.term()
}

// requestTerm is input.request, as r's JSON tags name its members.
func requestTerm(r Request) *ast.Term {
	f := make(fields, 0, 4)
	f.str("method", r.Method, false)
	f.add("path", strArray(r.Path))
	if r.Headers == nil {
		f.add("headers", ast.NullTerm())
	} else {
		h := make(fields, 0, len(r.Headers))
		for k, v := range r.Headers {
			h.add(k, strArray(v))
		}
		f.add("headers", h.term())
	}
	f.str("source_address", r.SourceAddress, false)
	return f.term()
}

// tokenTerm is input.token, as c's JSON tags name its members.
func tokenTerm(c TokenClaims) *ast.Term {
	f := make(fields, 0, 8)
	f.str("id", c.ID, false)
	f.str("key_id", c.KeyID, false)
	f.str("method", c.Method, false)
	f.num("not_before", c.NotBefore, false)
	f.num("expires", c.Expires, false)
	f.str("cidr", c.CIDR, true)
	f.str("tenant", c.Tenant, true)
	f.str("audience", c.Audience, true)
	return f.term()
}

// value is the fetch decision's input document.
func (in fetchInput) value() (ast.Value, error) {
	f := make(fields, 0, 5)
	f.str("via", in.Via, false)
	f.add("request", requestTerm(in.Request))
	if in.Token != nil {
		f.add("token", tokenTerm(*in.Token))
	}
	f.add("artifact", artifactTerm(in.Artifact))
	f.num("now", in.Now, false)
	return f.term().Value, nil
}

// value is the offload decision's input document.
func (in offloadInput) value() (ast.Value, error) {
	f := make(fields, 0, 12)
	f.str("server", in.Server, true)
	f.str("tool", in.Tool, true)
	f.str("method", in.Method, false)
	f.str("kind", in.Kind, false)
	f.str("mime_type", in.MimeType, true)
	f.num("size", in.Size, false)
	f.num("threshold", in.Threshold, true)
	f.num("budget", in.Budget, true)
	if in.OverBudget {
		f.add("over_budget", ast.BooleanTerm(true))
	}
	f.str("tenant", in.Tenant, true)
	f.str("client", in.Client, true)
	if err := f.claims(in.Claims); err != nil {
		return nil, err
	}
	return f.term().Value, nil
}

// value is the mint decision's input document.
func (in mintInput) value() (ast.Value, error) {
	f := make(fields, 0, 8)
	f.add("artifact", artifactTerm(in.Artifact))
	f.str("tenant", in.Tenant, true)
	f.str("source", in.Source, false)
	f.num("requested_ttl_seconds", in.RequestedTTLSeconds, false)
	f.str("cidr", in.CIDR, true)
	f.str("audience", in.Audience, true)
	f.num("now", in.Now, false)
	if err := f.claims(in.Claims); err != nil {
		return nil, err
	}
	return f.term().Value, nil
}

// value is the call decision's input document. The arguments come from a
// client and are converted by OPA (an error, such as a value that is not
// JSON, denies the call); they are absent when empty, as their JSON tag
// says.
func (in callInput) value() (ast.Value, error) {
	f := make(fields, 0, 7)
	f.str("tenant", in.Tenant, false)
	f.str("upstream", in.Upstream, false)
	f.str("kind", in.Kind, false)
	f.str("name", in.Name, false)
	if len(in.Arguments) > 0 {
		args, err := ast.InterfaceToValue(in.Arguments)
		if err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		f.add("arguments", ast.NewTerm(args))
	}
	f.add("listing", ast.BooleanTerm(in.Listing))
	if err := f.claims(in.Claims); err != nil {
		return nil, err
	}
	return f.term().Value, nil
}

// goInput is any other Go value, converted by OPA (the decision log's mask
// query, which is off the hot path).
type goInput struct{ v any }

// value converts the Go value through OPA's JSON round trip.
func (g goInput) value() (ast.Value, error) { return ast.InterfaceToValue(g.v) }
