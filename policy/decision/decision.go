// Package decision holds the input and output documents of Spillway's
// policy decisions (fetch, offload, mint, call), as plain Go types with the
// JSON field names Rego policies see, and the pure rules applied to a
// decision (Mint.Narrow), and the Recorder through which a caller learns
// the id of a decision made for it. It imports only the standard library, so a
// package that asks for decisions (the artifact service, a store) does
// not pull in the OPA engine; package policy evaluates them and aliases
// these types under its older names (policy.FetchDecision is Fetch).
// TestDeps keeps it a leaf.
//
// The decision types are values without behaviour beyond Narrow: safe to
// copy and to share between goroutines once built.
package decision

// The input and output documents of the decision points. Field names
// are the JSON the Rego policies see (input.request.method, ...), so they
// are part of the contract with policy authors: rename nothing.

// ArtifactInfo is an artifact's metadata as policies see it.
type ArtifactInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mime_type"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256,omitempty"`
	Created  int64  `json:"created,omitempty"` // Unix seconds
	Expires  int64  `json:"expires,omitempty"` // Unix seconds
	Tenant   string `json:"tenant,omitempty"`
	Source   string `json:"source,omitempty"`
}

// Request is an HTTP request in the shape OPA users know from HTTP API
// authorization. Headers have lower-case names; the token, Authorization
// and Cookie are removed before a policy sees them.
type Request struct {
	Method        string              `json:"method"`
	Path          []string            `json:"path"` // "/a/xyz" → ["a", "xyz"]
	Headers       map[string][]string `json:"headers"`
	SourceAddress string              `json:"source_address"` // IP, no port
}

// TokenClaims are the verified claims of the link token.
type TokenClaims struct {
	ID        string `json:"id"`
	KeyID     string `json:"key_id"`
	Method    string `json:"method"` // "GET" (GET and HEAD) or "HEAD"
	NotBefore int64  `json:"not_before"`
	Expires   int64  `json:"expires"`
	CIDR      string `json:"cidr,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
	Audience  string `json:"audience,omitempty"`
}

// FetchInput is the input of the fetch decision (data.spillway.fetch),
// asked before any artifact bytes leave Spillway, whatever the way.
type FetchInput struct {
	// Via is the way the bytes leave: "link" (the /a/ endpoint, with a
	// token), "redirect" (a presigned storage URL handed out without a
	// request of the holder's own: resources/stream's redirect mode),
	// "resources/read" or "resources/stream" (MCP, no token).
	Via     string  `json:"via"`
	Request Request `json:"request"`
	// Token is present only for "link": MCP callers were authenticated by
	// their session, and the caller's tenant was checked against the
	// artifact's before the policy is asked.
	Token    *TokenClaims `json:"token,omitempty"`
	Artifact ArtifactInfo `json:"artifact"`
	Now      int64        `json:"now"` // Unix seconds
}

// Fetch is the output of the fetch decision. The zero value denies.
type Fetch struct {
	Allow   bool              `json:"allow"`
	Reason  string            `json:"reason,omitempty"`
	Headers map[string]string `json:"headers,omitempty"` // added to the response; safety headers cannot be overridden
	// Redirect lets this fetch be answered with a presigned storage URL
	// (where the operator enabled --redirect, and always for via
	// "redirect"). A storage URL is bound to nothing but its expiry: no
	// client CIDR, no revocation, no policy on later use.
	Redirect bool `json:"redirect,omitempty"`
}

// OffloadInput is the input of the offload decision (data.spillway.offload).
type OffloadInput struct {
	Server   string `json:"server,omitempty"` // upstream name
	Tool     string `json:"tool,omitempty"`   // tool name, for tools/call
	Method   string `json:"method"`           // "tools/call" or "resources/read"
	Kind     string `json:"kind"`             // "text", "image", "audio", "resource", "structured"
	MimeType string `json:"mime_type,omitempty"`
	Size     int64  `json:"size"` // decoded bytes
	// Threshold is the proxy's configured size for this kind
	// (--text-threshold, --binary-threshold); items at or below it are
	// never asked about.
	Threshold int64 `json:"threshold,omitempty"`
	// Budget is the proxy's per-result budget (--result-budget): what a
	// tools/call result may keep inline, content and structuredContent
	// together. OverBudget is set for what the proxy chose to move out so
	// that the result fits it; the item may be under its Threshold.
	Budget     int64  `json:"budget,omitempty"`
	OverBudget bool   `json:"over_budget,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	Client     string `json:"client,omitempty"` // clientInfo.name, when known
	// Claims are the caller's OAuth access token claims (see
	// CallInput.Claims).
	Claims map[string]any `json:"claims,omitempty"`
}

// Offload is the output of the offload decision. The zero value keeps
// the content inline.
type Offload struct {
	Offload    bool   `json:"offload"`
	Threshold  int64  `json:"threshold,omitempty"`   // bytes; informative
	TTLSeconds int64  `json:"ttl_seconds,omitempty"` // link lifetime; 0 = caller's default
	Audience   string `json:"audience,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// MintInput is the input of the mint decision (data.spillway.mint).
type MintInput struct {
	Artifact            ArtifactInfo `json:"artifact"`
	Tenant              string       `json:"tenant,omitempty"` // who asks for the link
	Source              string       `json:"source"`           // "offload", "api", "cli", "stream"
	RequestedTTLSeconds int64        `json:"requested_ttl_seconds"`
	CIDR                string       `json:"cidr,omitempty"`
	Audience            string       `json:"audience,omitempty"`
	Now                 int64        `json:"now"`
	// Claims are the OAuth access token claims of the caller the link is
	// minted for, when one is known (an offload of its call; see
	// CallInput.Claims).
	Claims map[string]any `json:"claims,omitempty"`
}

// Mint is the output of the mint decision. The zero value denies.
type Mint struct {
	Allow         bool   `json:"allow"`
	MaxTTLSeconds int64  `json:"max_ttl_seconds,omitempty"` // cap; 0 = no cap beyond the engine's
	RequireCIDR   string `json:"require_cidr,omitempty"`    // binding the link must carry
	Audience      string `json:"audience,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// CallInput is the input of the call decision (data.spillway.call), asked
// before a request reaches an upstream on a client's behalf: a tools/call,
// a prompts/get, an upstream's resources/read, and, with Listing set, for
// each tool of a tools/list (a tool a tenant may not call is not listed).
type CallInput struct {
	Tenant string `json:"tenant"`
	// Upstream is the configured name of the tool server the request goes to.
	Upstream string `json:"upstream"`
	// Kind is "tool", "prompt" or "resource".
	Kind string `json:"kind"`
	// Name is the tool's or prompt's name as its upstream knows it (no
	// gateway prefix), or the resource's URI as its upstream knows it.
	Name string `json:"name"`
	// Arguments are the request's arguments (a JSON object); absent when
	// Listing.
	Arguments map[string]any `json:"arguments,omitempty"`
	// Listing is true when the question is whether to list the tool, not
	// whether to make a given call: a rule about arguments should allow it.
	Listing bool `json:"listing"`
	// Claims are every claim of the caller's OAuth access token, as its
	// JSON payload holds them (numbers as float64): input.claims.groups,
	// input.claims.sub. Absent for a static token; never the token.
	// Conversion is bounded (package policy): claims nested or numerous
	// past its limits fail the decision, which denies.
	Claims map[string]any `json:"claims,omitempty"`
}

// Call is the call decision. The zero value denies. A policy that
// defines no call rule at all allows every call (policy.Engine.Call says
// why); one that defines it is held to it.
type Call struct {
	Allow bool `json:"allow"`
	// Reason is told to the client when the call is refused.
	Reason string `json:"reason,omitempty"`
}
