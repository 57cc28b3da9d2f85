package decision

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrWiden is wrapped by Narrow when the caller asked for a link that the
// mint decision's bindings do not cover: signing it as asked would break
// the policy, signing it as required would widen what the caller asked.
var ErrWiden = errors.New("policy: the link asked for is outside the mint decision's bindings")

// Narrow applies the decision's bindings to the client network and
// audience a caller asked the link to be bound to. A decision narrows a
// link, never widens it:
//
//   - require_cidr: a caller's prefix inside it (as narrow or narrower) is
//     kept; none asked for gets the required one; one outside it, or wider,
//     is an error wrapping ErrWiden.
//   - audience: none asked for gets the required one; the same is kept;
//     another is an error wrapping ErrWiden.
//
// A require_cidr that is not a prefix is an error (the policy's, not the
// caller's). Narrow is pure.
func (d Mint) Narrow(cidr netip.Prefix, audience string) (netip.Prefix, string, error) {
	if d.RequireCIDR != "" {
		req, err := netip.ParsePrefix(d.RequireCIDR)
		if err != nil {
			return netip.Prefix{}, "", fmt.Errorf("policy: mint decision: bad require_cidr %q: %w", d.RequireCIDR, err)
		}
		req = req.Masked()
		switch {
		case !cidr.IsValid():
			cidr = req
		case cidr.Bits() < req.Bits() || !req.Contains(cidr.Addr()):
			return netip.Prefix{}, "", fmt.Errorf("%w: client network %s is not inside %s", ErrWiden, cidr, req)
		}
	}
	if d.Audience != "" {
		switch audience {
		case "":
			audience = d.Audience
		case d.Audience:
		default:
			return netip.Prefix{}, "", fmt.Errorf("%w: audience %q is not %q", ErrWiden, audience, d.Audience)
		}
	}
	return cidr, audience, nil
}
