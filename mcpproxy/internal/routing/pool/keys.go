package pool

import (
	"strconv"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// The keys of Tenants' connections: a tenant's own stateless connection is
// keyed by the quoted tenant, a bridged one by the quoted tenant, a space
// and the capabilities its client declared. Quoting keeps a tenant name
// that holds a space from reading as another tenant's key.

// TenantKey is the key of tenant's own stateless connection.
func TenantKey(tenant string) string { return strconv.Quote(tenant) }

// CapsKey is the key of tenant's bridged connection for clients that
// declared caps (JSON, in one spelling per set).
func CapsKey(tenant string, caps []byte) string { return strconv.Quote(tenant) + " " + string(caps) }

// KeyTenant returns the tenant of a key (the key itself when it is not
// one of these keys). Tenants.LimitPerTenant takes it.
func KeyTenant(key string) string {
	q, err := strconv.QuotedPrefix(key)
	if err != nil {
		return key
	}
	t, _ := strconv.Unquote(q)
	return t
}

// KeyCaps returns the capabilities in a bridged key, nil for a plain one.
func KeyCaps(key string) []byte {
	q, err := strconv.QuotedPrefix(key)
	if err != nil || len(key) <= len(q)+1 {
		return nil
	}
	rest := []byte(key[len(q)+1:])
	return rest[:jsonrpc.SkipValue(rest, 0)]
}
