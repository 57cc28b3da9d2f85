package policy

import (
	"context"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestReport is what a policy's Rego tests found.
type TestReport struct {
	Results  []*tester.Result
	Coverage *cover.Report // nil unless asked for
}

// Failed names the tests that did not pass, as package.rule.
func (r TestReport) Failed() []string {
	var failed []string
	for _, res := range r.Results {
		if !res.Pass() {
			failed = append(failed, res.Package+"."+res.Name)
		}
	}
	return failed
}

// loadPath loads a folder, or an unverified bundle when path ends in
// .tar.gz, exactly as the engine would (vetted for the sandbox).
func loadPath(path string) (*source, error) {
	if strings.HasSuffix(path, ".tar.gz") {
		return load("", path, Options{})
	}
	return load(path, "", Options{})
}

// Test runs the Rego tests of the policy at path (a folder, or a bundle
// ending in .tar.gz whose signature is not checked) in the sandbox the
// engine uses: a test that calls a removed built-in is refused, not run.
// The error is about loading or compiling; failing tests are in the report.
func Test(ctx context.Context, path string, coverage bool) (TestReport, error) {
	s, err := loadPath(path)
	if err != nil {
		return TestReport{}, err
	}
	var cov *cover.Cover
	if coverage {
		cov = cover.New()
	}
	return s.runTests(ctx, cov)
}

// Check compiles the policy at path in strict mode with the sandbox's
// capabilities: what the engine would refuse to load, Check refuses,
// naming the removed built-in and why.
func Check(path string) error {
	s, err := loadPath(path)
	if err != nil {
		return err
	}
	c := ast.NewCompiler().WithStrict(true).WithCapabilities(Capabilities())
	if c.Compile(s.modules); c.Failed() {
		return fmt.Errorf("%s: %w", path, c.Errors)
	}
	return nil
}
