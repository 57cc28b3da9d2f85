package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spillway-dev/spillway/policy"
)

const policyUsage = `Usage:
  spillway policy test DIR [--coverage]                     run the Rego unit tests in DIR
  spillway policy check DIR                                 compile DIR in strict mode, in Spillway's sandbox
  spillway policy eval DIR --point fetch|offload|mint|call --input FILE   print a decision
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
		err = policy.Check(dir)
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

// policyTest runs DIR's Rego tests in the same sandbox as the engine:
// a test that calls http.send fails to load here too.
func policyTest(ctx context.Context, dir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	coverage := fs.Bool("coverage", false, "report which lines the tests cover")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := policy.Test(ctx, dir, *coverage)
	if err != nil {
		return err
	}
	n, fail := len(rep.Results), 0
	for _, res := range rep.Results {
		if !res.Pass() {
			fail++
			msg := "FAIL"
			if res.Error != nil {
				msg = "ERROR " + res.Error.Error()
			}
			fmt.Fprintf(stdout, "%s %s.%s\n", msg, res.Package, res.Name)
			for _, l := range strings.Split(strings.TrimRight(string(res.Output), "\n"), "\n") {
				if l != "" {
					fmt.Fprintf(stdout, "  %s\n", l) // print() output, as opa test shows it
				}
			}
		}
	}
	fmt.Fprintf(stdout, "PASS: %d/%d\n", n-fail, n)
	if rep.Coverage != nil {
		fmt.Fprintf(stdout, "coverage: %.1f%%\n", rep.Coverage.Coverage)
		for file, fr := range rep.Coverage.Files {
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

func policyEval(ctx context.Context, dir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("policy eval", flag.ContinueOnError)
	point := fs.String("point", "fetch", "decision point: fetch, offload, mint or call")
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
	case "call":
		var in policy.CallInput
		if err = json.Unmarshal(b, &in); err == nil {
			d, err = e.Call(ctx, in)
		}
	default:
		return fmt.Errorf("--point %q: want fetch, offload, mint or call", *point)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}
