// Package policytest is a hostile peer for tests of the policy sandbox: a
// loopback HTTP server and a named pipe that count every attempt to reach
// them (Trap, on Unix), and policy folders that try every known way out of
// the sandbox. Buffer collects a running server's log.
package policytest
