# shellcheck shell=bash
# Sourced by scripts/mutants: a claim that enters the deploy phase in its own write
# (internal/authority/enter.go, latestwins run). It grants exactly what the gate would, stores the
# leases it grants, and leaves a gate that refuses to the Gate that follows.

E=internal/authority/enter.go
mutant "a claim that enters reports leases its write does not store" $E \
  's/\td\.Env = trial\n//' \
  TestConformance/Enter/AsClaimThenGate
mutant "a claim whose gate refuses keeps what the refusal recorded" $E \
  's/\ttrial := d\.Env\.clone\(\)/\ttrial := d.Env/' \
  TestConformance/Enter/AsClaimThenGate
mutant "a claim whose write is several documents of the per-scope layout enters the deploy phase" internal/authority/authority.go \
  's/\t\toneDoc := !d\.Env\.Split \|\| \(len\(in\.Scopes\) == 1 && \(in\.Policy == "" \|\| in\.Policy == d\.Env\.policy\(\)\)\)/\t\toneDoc := true/' \
  TestConformanceSplit/Enter/AsClaimThenGate
