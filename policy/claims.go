package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Bounds on the claims converted into a decision's input: an access
// token's claims come from its issuer, but a token that nests or
// repeats values without end must cost a decision no more than this.
const (
	maxClaimsDepth  = 16   // nested arrays and objects
	maxClaimsValues = 4096 // values of every kind, the members' names aside
)

// ErrClaims is wrapped by the error of a decision whose claims are past
// the bounds or hold what JSON cannot: the decision fails, and denies.
var ErrClaims = errors.New("policy: the caller's claims cannot be an input")

// claims adds the member claims (the caller's access token claims),
// unless there are none, as encoding/json's omitempty leaves them out.
func (f *fields) claims(c map[string]any) error {
	if len(c) == 0 {
		return nil
	}
	n := 0
	t, err := claimTerm(c, 0, &n)
	if err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	f.add("claims", t)
	return nil
}

// claimTerm converts one decoded JSON value at depth, counting values in
// n; the values are those encoding/json decodes into an any (json.Number
// and integers too, which a caller may have built).
func claimTerm(v any, depth int, n *int) (*ast.Term, error) {
	if *n++; *n > maxClaimsValues {
		return nil, fmt.Errorf("%w: over %d values", ErrClaims, maxClaimsValues)
	}
	switch v := v.(type) {
	case nil:
		return ast.NullTerm(), nil
	case bool:
		return ast.BooleanTerm(v), nil
	case string:
		return ast.StringTerm(v), nil
	case float64:
		return ast.FloatNumberTerm(v), nil
	case int:
		return ast.IntNumberTerm(v), nil
	case int64:
		return ast.NewTerm(ast.Number(strconv.FormatInt(v, 10))), nil
	case json.Number:
		return ast.NewTerm(ast.Number(v)), nil
	case []any, map[string]any:
		if depth >= maxClaimsDepth {
			return nil, fmt.Errorf("%w: nested over %d levels", ErrClaims, maxClaimsDepth)
		}
		return claimComposite(v, depth+1, n)
	}
	return nil, fmt.Errorf("%w: a value of type %T", ErrClaims, v)
}

// claimComposite converts an array or an object whose members are at
// depth.
func claimComposite(v any, depth int, n *int) (*ast.Term, error) {
	if a, ok := v.([]any); ok {
		ts := make([]*ast.Term, len(a))
		for i, e := range a {
			t, err := claimTerm(e, depth, n)
			if err != nil {
				return nil, err
			}
			ts[i] = t
		}
		return ast.ArrayTerm(ts...), nil
	}
	m := v.(map[string]any)
	items := make([][2]*ast.Term, 0, len(m))
	for k, e := range m {
		t, err := claimTerm(e, depth, n)
		if err != nil {
			return nil, err
		}
		items = append(items, ast.Item(ast.StringTerm(k), t))
	}
	return ast.NewTerm(ast.NewObject(items...)), nil
}
