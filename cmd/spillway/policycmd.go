package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/spillway-dev/spillway/policy"
)

const policyUsage = `Usage:
  spillway policy test DIR [--coverage]                     run the Rego unit tests in DIR
  spillway policy check DIR                                 compile DIR in strict mode
  spillway policy eval DIR --point fetch|offload|mint --input FILE   print a decision
`

// policyMain implements `spillway policy`.
func policyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	cmd, dir := args[0], args[1]
	var err error
	switch cmd {
	case "test":
		err = policyTest(ctx, dir, args[2:], stdout)
	case "check":
		err = policyCheck(dir)
		if err == nil {
			fmt.Fprintln(stdout, "ok")
		}
	case "eval":
		err = policyEval(ctx, dir, args[2:], stdout)
	default:
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "spillway policy:", err)
		return 1
	}
	return 0
}

func policyTest(ctx context.Context, dir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	coverage := fs.Bool("coverage", false, "report which lines the tests cover")
	if err := fs.Parse(args); err != nil {
		return err
	}
	modules, store, err := tester.Load([]string{dir}, nil)
	if err != nil {
		return err
	}
	cov := cover.New()
	r := tester.NewRunner().SetStore(store)
	if *coverage {
		r = r.SetCoverageQueryTracer(cov)
	}
	ch, err := r.Run(ctx, modules)
	if err != nil {
		return err
	}
	n, fail := 0, 0
	for res := range ch {
		n++
		if !res.Pass() {
			fail++
			msg := "FAIL"
			if res.Error != nil {
				msg = "ERROR " + res.Error.Error()
			}
			fmt.Fprintf(stdout, "%s %s.%s\n", msg, res.Package, res.Name)
		}
	}
	fmt.Fprintf(stdout, "PASS: %d/%d\n", n-fail, n)
	if *coverage {
		rep := cov.Report(modules)
		fmt.Fprintf(stdout, "coverage: %.1f%%\n", rep.Coverage)
		for file, fr := range rep.Files {
			fmt.Fprintf(stdout, "  %s: %.1f%%\n", file, fr.Coverage)
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no tests", dir)
	}
	if fail > 0 {
		return fmt.Errorf("%d of %d tests failed", fail, n)
	}
	return nil
}

// policyCheck compiles DIR in strict mode with the capabilities Spillway
// enforces: a policy that uses http.send or net.* fails here, not at load.
func policyCheck(dir string) error {
	res, err := loader.NewFileLoader().Filtered([]string{dir}, nil)
	if err != nil {
		return err
	}
	mods := map[string]*ast.Module{}
	for name, m := range res.Modules {
		mods[name] = m.Parsed
	}
	c := ast.NewCompiler().WithStrict(true).WithCapabilities(policy.Capabilities())
	if c.Compile(mods); c.Failed() {
		return c.Errors
	}
	return nil
}

func policyEval(ctx context.Context, dir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("policy eval", flag.ContinueOnError)
	point := fs.String("point", "fetch", "decision point: fetch, offload or mint")
	inputFile := fs.String("input", "", "input JSON `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*inputFile)
	if err != nil {
		return err
	}
	e, err := policy.New(ctx, policy.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer e.Close()
	var d any
	switch *point {
	case "fetch":
		var in policy.FetchInput
		if err = json.Unmarshal(b, &in); err == nil {
			d, err = e.Fetch(ctx, in)
		}
	case "offload":
		var in policy.OffloadInput
		if err = json.Unmarshal(b, &in); err == nil {
			d, err = e.Offload(ctx, in)
		}
	case "mint":
		var in policy.MintInput
		if err = json.Unmarshal(b, &in); err == nil {
			d, err = e.Mint(ctx, in)
		}
	default:
		return fmt.Errorf("--point %q: want fetch, offload or mint", *point)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}
