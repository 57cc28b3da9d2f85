// Package policy is Spillway's embedded OPA engine: it loads Rego policies,
// evaluates the offload, mint, fetch and call decisions with prepared
// queries, and denies whenever evaluation fails. A policy that defines no
// call rule at all allows every call (see Engine.Call): it was written
// before that decision existed. The decisions' input and output types
// are in package decision, which imports no OPA package (a caller that
// only builds inputs and reads decisions needs nothing more); this package
// aliases them (FetchInput, FetchDecision, ...).
//
// Policies run in a sandbox with no exit: the decisions, the Rego tests
// that gate every load, reload and dry-run, and `spillway policy
// test|check|eval` all compile with Capabilities, which has no built-in
// that reaches the network, a file or the environment, and an empty
// allow_net. The pure CIDR built-ins (net.cidr_contains and its kin) stay;
// net.cidr_expand, whose result is as large as its prefix, does not. A
// policy that calls a removed built-in is refused by name.
//
// Every evaluation is bounded too: numbers.range and numbers.range_step
// make at most MaxRange numbers (more is an evaluation error), and each
// decision has a deadline of its own (Options.DecisionTimeout), past
// which it is stopped and denies with ErrDeadline.
package policy
