package metrics

import (
	"strings"
)

// methods are the values of the method label: the requests an MCP client
// sends (every revision's, the stateless era's and the extensions'
// Spillway offers). Anything else is "other", so a client cannot add
// series by inventing methods.
var methods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "resources/stream": true,
	"completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/list": true, "tasks/result": true, "tasks/cancel": true,
	"subscriptions/listen": true, "stream/resume": true, "stream/poll": true,
}

// Method returns the method label of method: itself when it is one of
// MCP's client requests, else "other".
func Method(method string) string {
	if methods[method] {
		return method
	}
	return "other"
}

// Codes the outcome depends on (package jsonrpc's and gateway's; copied
// so that this package imports nothing of the proxy's).
const (
	codeUpstream = -32000 // jsonrpc.CodeUpstream: the proxy's "the upstream failed"
	codeDenied   = -32006 // gateway.CodeDenied: the call decision refused
)

// upstreamFailures are the phrases of the proxy's own CodeUpstream
// errors, each with the kind of failure it says; the first that the
// message contains wins.
var upstreamFailures = []struct{ phrase, kind string }{
	{"stalled", KindTimeout},
	{"did not answer", KindTimeout},
	{"unreachable", KindConnect},
	{"unavailable", KindConnect},
	{"upstream answered", KindStatus},
	{"refused", KindStatus},
	{"exited", KindClosed},
	{"ended", KindClosed},
	{"closed", KindClosed},
	{"invalid result", KindProtocol},
	{"exceeds the", KindProtocol},
	{"could not be spooled", KindProtocol},
}

// Outcome classifies an answer: isErr is whether it is a JSON-RPC error,
// code and message that error's. A CodeUpstream error whose message is
// one the proxy writes when an upstream fails is upstream_error (with the
// failure's kind); the call decision's refusal is denied; any other error
// is error. (An upstream that answers with -32000 and words like the
// proxy's is counted as an upstream failure: the code and message are all
// a client sees either way.)
func Outcome(isErr bool, code int, message string) (outcome, kind string) {
	switch {
	case !isErr:
		return OK, ""
	case code == codeDenied:
		return Denied, ""
	case code == codeUpstream:
		if k := failureKind(message); k != "" {
			return UpstreamError, k
		}
	}
	return Error, ""
}

// failureKind is the kind of upstream failure message says, "" for none.
func failureKind(message string) string {
	for _, f := range upstreamFailures {
		if strings.Contains(message, f.phrase) {
			return f.kind
		}
	}
	return ""
}

// StatusOutcome classifies an HTTP answer that carried no JSON-RPC
// response: 403 is denied, a 5xx an upstream failure (of the kind its
// text says, else status), another status an error. text is the start of
// the body.
func StatusOutcome(status int, text string) (outcome, kind string) {
	switch {
	case status == 403:
		return Denied, ""
	case status >= 500:
		if k := failureKind(text); k != "" {
			return UpstreamError, k
		}
		return UpstreamError, KindStatus
	}
	return Error, ""
}
