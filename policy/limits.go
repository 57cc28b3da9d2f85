package policy

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// The bounds on what one evaluation may take: Rego is code a security
// team ships into this process, and a mistake in it (or a policy built
// to hurt) must cost one decision, denied, never the process.

// MaxRange is the most numbers numbers.range and numbers.range_step make
// in a Spillway policy: OPA builds the whole array first, so
// numbers.range(1, 1e9) would take gigabytes before any deadline could
// stop it. A larger range is an evaluation error, which denies.
const MaxRange = 10_000

// DefaultDecisionTimeout is Options.DecisionTimeout's default.
const DefaultDecisionTimeout = time.Second

// ErrDeadline is wrapped, with ErrEval, by a decision that did not finish
// within Options.DecisionTimeout: it denies as any evaluation failure does.
var ErrDeadline = errors.New("policy: the decision passed its deadline")

// init puts OPA's range built-ins behind MaxRange. OPA looks its own
// built-ins up in one process-wide table before any a query declares, so
// replacing the entry is the one way to bound them; every evaluation in
// this process (decisions, Rego tests, `spillway policy`) is Spillway's.
func init() {
	for _, b := range []*ast.Builtin{ast.NumbersRange, ast.NumbersRangeStep} {
		topdown.RegisterBuiltinFunc(b.Name, boundedRange(b.Decl.Arity(), topdown.GetBuiltin(b.Name)))
	}
}

// boundedRange refuses a range of more than MaxRange numbers, and leaves
// every other call (operand errors included) to OPA's implementation.
// arity is the built-in's: OPA may pass the output term after the
// arguments.
func boundedRange(arity int, opa topdown.BuiltinFunc) topdown.BuiltinFunc {
	return func(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
		if n, ok := rangeLen(operands[:min(arity, len(operands))]); ok && n.Cmp(big.NewInt(MaxRange)) > 0 {
			return fmt.Errorf("a range of %s numbers is more than the %d a Spillway policy may make", n, MaxRange)
		}
		return opa(bctx, operands, iter)
	}
}

// rangeLen is how many numbers numbers.range(x, y) or
// numbers.range_step(x, y, step) would make: |y-x|/step + 1. ok is false
// when the operands are not integers or the step is not positive, which
// OPA reports itself.
func rangeLen(operands []*ast.Term) (n *big.Int, ok bool) {
	if len(operands) < 2 {
		return nil, false
	}
	x, err := builtins.BigIntOperand(operands[0].Value, 1)
	if err != nil {
		return nil, false
	}
	y, err := builtins.BigIntOperand(operands[1].Value, 2)
	if err != nil {
		return nil, false
	}
	step := big.NewInt(1)
	if len(operands) > 2 {
		if step, err = builtins.BigIntOperand(operands[2].Value, 3); err != nil || step.Sign() <= 0 {
			return nil, false
		}
	}
	n = new(big.Int).Sub(y, x)
	n.Abs(n).Quo(n, step)
	return n.Add(n, big.NewInt(1)), true
}

// withDeadline gives one evaluation of the engine its own deadline, whose
// cause is ErrDeadline.
func (e *Engine) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, e.o.DecisionTimeout, ErrDeadline)
}
