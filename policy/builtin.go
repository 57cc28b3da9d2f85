package policy

// builtinFetch is data.spillway.fetch of the built-in policy
// (default/spillway.rego), rule for rule, on the input fetchInput builds:
// the token is present only when in.Token is set, and its tenant only
// when not empty. TestBuiltinFetchMatchesRego holds the two equal over
// every combination of the fields the rule reads; a change to the rule
// must change both.
func builtinFetch(in FetchInput) FetchDecision {
	t := in.Token
	methodAllowed := t == nil || t.Method == "GET" || (t.Method == "HEAD" && in.Request.Method == "HEAD")
	tenantMatches := t == nil || t.Tenant == "" || t.Tenant == in.Artifact.Tenant
	if methodAllowed && tenantMatches {
		return FetchDecision{Allow: true, Redirect: true}
	}
	return FetchDecision{Allow: false, Reason: "the link does not allow this request"}
}

// builtinCall is data.spillway.call of the built-in policy
// (default/spillway.rego), which allows every call, and the call decision
// of a policy that defines no call rule (allowCall). TestBuiltinCallMatchesRego
// holds it equal to both.
func builtinCall(CallInput) CallDecision { return CallDecision{Allow: true} }
