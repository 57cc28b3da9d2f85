package jsonrpc

// MCP conventions carried in the envelope: the request-scoped values the
// proxy must rename per client (progress tokens, the id a cancellation
// names, the subscription id of a listen stream) live at fixed places.

// Method names and _meta keys the proxy looks at.
const (
	MethodCancelled = "notifications/cancelled"
	MethodProgress  = "notifications/progress"
	// MetaSubscriptionID names, in a notification's _meta, the
	// subscriptions/listen request it belongs to (2026-07-28).
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// MetaProtocolVersion is a stateless-era request's revision.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaClientCapabilities is a stateless-era request's capabilities.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// ProgressToken returns a request's params._meta.progressToken, raw; nil
// when there is none.
func ProgressToken(m *Message) []byte { return Path(m.Params, "_meta", "progressToken") }

// WithProgressToken returns m with params._meta.progressToken set to tok.
func (m *Message) WithProgressToken(tok []byte) *Message {
	return m.withParam(tok, "_meta", "progressToken")
}

// NotifiedToken returns a progress notification's params.progressToken.
func NotifiedToken(m *Message) []byte { return RawMember(m.Params, "progressToken") }

// WithNotifiedToken returns a progress notification naming tok instead.
func (m *Message) WithNotifiedToken(tok []byte) *Message { return m.withParam(tok, "progressToken") }

// CancelledID returns the requestId a notifications/cancelled names.
func CancelledID(m *Message) []byte { return RawMember(m.Params, "requestId") }

// WithCancelledID returns a cancellation naming id instead.
func (m *Message) WithCancelledID(id []byte) *Message { return m.withParam(id, "requestId") }

// SubscriptionID returns params._meta's subscription id, raw.
func SubscriptionID(m *Message) []byte { return Path(m.Params, "_meta", MetaSubscriptionID) }

// WithSubscriptionID returns m naming the subscription id instead.
func (m *Message) WithSubscriptionID(id []byte) *Message {
	return m.withParam(id, "_meta", MetaSubscriptionID)
}

// Meta returns params._meta[key], raw.
func Meta(m *Message, key string) []byte { return Path(m.Params, "_meta", key) }

// MetaString returns params._meta[key] when it is a string.
func MetaString(m *Message, key string) string {
	return StringMember(Path(m.Params, "_meta"), key)
}

// withParam returns m with the params member at keys set to v; m itself
// when its params are not an object.
func (m *Message) withParam(v []byte, keys ...string) *Message {
	p, ok := SetPath(m.Params, v, keys...)
	if !ok {
		return m
	}
	return m.WithParams(p)
}
