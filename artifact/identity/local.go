package identity

import (
	"crypto/sha256"
	"fmt"
)

// Local returns Tenants that admit exactly one bearer token, as tenant "".
// It guards the MCP face when no inbound tokens are configured, because the
// listener that serves links to sandboxes must not also serve MCP to
// whoever reaches it. Unlike tokens from NewTenants, it turns on nothing
// else (the management API stays off). It returns an error when tok breaks
// NewTenants' rules for a token; the error never contains the token.
func Local(tok string) (*Tenants, error) {
	if !validToken(tok) {
		return nil, fmt.Errorf("identity: the local token must be %d to %d characters of A-Z a-z 0-9 - . _ ~ + / and optional = padding", MinTokenLen, MaxTokenLen)
	}
	return &Tenants{tokens: []entry{{sha256.Sum256([]byte(tok)), ""}}}, nil
}
