package identity

import "context"

type principalKey struct{}

// NewContext returns ctx carrying p, the caller's principal, for what
// serves the request later (policy input, audit) to read with FromContext.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal NewContext put in ctx; ok is false
// when there is none.
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ClaimsFrom returns the access token claims of the principal in ctx,
// for a decision's input: nil when there is none, or when it
// authenticated with a static token. The map is the principal's own:
// read it, never change it.
func ClaimsFrom(ctx context.Context) map[string]any {
	p, ok := FromContext(ctx)
	if !ok || !p.OAuth {
		return nil
	}
	return p.Claims
}
