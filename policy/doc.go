// Package policy is Spillway's embedded OPA engine: it loads Rego policies,
// evaluates the offload, mint and fetch decisions with prepared queries, and
// denies whenever evaluation fails.
package policy
