package policy

import "github.com/spillway-dev/spillway/policy/decision"

// The input and output documents of the four decision points live in
// package decision, which imports no OPA package; these are their names
// in this package, kept so both compile. New code that only builds
// inputs and reads decisions should import decision.
type (
	ArtifactInfo    = decision.ArtifactInfo
	Request         = decision.Request
	TokenClaims     = decision.TokenClaims
	FetchInput      = decision.FetchInput
	FetchDecision   = decision.Fetch
	OffloadInput    = decision.OffloadInput
	OffloadDecision = decision.Offload
	MintInput       = decision.MintInput
	MintDecision    = decision.Mint
	CallInput       = decision.CallInput
	CallDecision    = decision.Call
)

// ErrWiden is decision.ErrWiden: see decision.Mint.Narrow.
var ErrWiden = decision.ErrWiden
